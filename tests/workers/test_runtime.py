"""The worker's model pool with real models: SmolLM2-135M-Instruct and a tiny random Llama built from it
(two real checkpoints, loaded by the real ``hf`` backend)."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest

from evalcore.models import load_backend
from tests.evalcore.models._shared import tiny_model_dir
from workers.runtime import ModelPool

GREEDY = {"max_new_tokens": 6, "temperature": 0.0}


class Loads:
    """A real loader that also counts how often the pool called it."""

    def __init__(self):
        self.calls: list[str] = []

    def __call__(self, path: Path, dtype: str = "float32"):
        def load():
            self.calls.append(f"{path.name}:{dtype}")
            return load_backend("hf", path=str(path), dtype=dtype, device="cpu", threads=1)

        return load


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, smollm2_dir) -> Path:
    return tiny_model_dir(str(tmp_path_factory.getbasetemp()), str(smollm2_dir))


def answer(backend) -> str:
    return "".join(backend.stream_chat([{"role": "user", "content": "What is the capital of France?"}], GREEDY))


def test_a_model_is_loaded_once_and_reused(smollm2_dir):
    pool, loads = ModelPool(max_models=2), Loads()
    first = pool.get(("hf", "smollm2"), loads(smollm2_dir))
    assert "Paris" in answer(first)
    again = pool.get(("hf", "smollm2"), loads(smollm2_dir))
    assert again is first and loads.calls == ["SmolLM2-135M-Instruct:float32"] and pool.loads == 1
    assert ("hf", "smollm2") in pool and ("hf", "other") not in pool


def test_the_least_recently_used_model_is_evicted_and_closed(smollm2_dir, tiny):
    pool, loads = ModelPool(max_models=2), Loads()
    smollm2 = pool.get("smollm2", loads(smollm2_dir))
    tiny32 = pool.get("tiny32", loads(tiny))
    assert pool.get("smollm2", loads(smollm2_dir)) is smollm2  # now the most recently used
    pool.get("tiny-bf16", loads(tiny, "bfloat16"))  # a third model: tiny32 goes
    assert "tiny32" not in pool and "smollm2" in pool and "tiny-bf16" in pool
    assert tiny32.model is None, "the evicted backend was closed (its weights released)"
    released = weakref.ref(tiny32)
    del tiny32
    gc.collect()
    assert released() is None, "the pool keeps no reference to an evicted model"
    assert "Paris" in answer(smollm2)  # the survivor still works
    reloaded = pool.get("tiny32", loads(tiny))  # asked for again: loaded again, smollm2 goes now
    assert reloaded.model is not None and "smollm2" not in pool
    assert loads.calls == ["SmolLM2-135M-Instruct:float32", "tiny-llama:float32", "tiny-llama:bfloat16",
                           "tiny-llama:float32"]  # fmt: skip
    assert pool.loads == 4


def test_a_failed_load_caches_nothing_and_is_tried_again(tmp_path, tiny):
    pool, loads = ModelPool(max_models=1), Loads()
    kept = pool.get("tiny", loads(tiny))
    with pytest.raises((FileNotFoundError, ValueError, OSError)):
        pool.get("missing", loads(tmp_path / "no-such-model"))
    assert "missing" not in pool and pool.loads == 1
    assert pool.get("tiny", loads(tiny)) is kept and kept.model is not None, "a failure evicts nothing"
    (tmp_path / "empty").mkdir()
    with pytest.raises((FileNotFoundError, ValueError, OSError)):
        pool.get("missing", loads(tmp_path / "empty"))
    assert loads.calls == ["tiny-llama:float32", "no-such-model:float32", "empty:float32"]


def test_concurrent_requests_for_one_model_load_it_once(tiny):
    pool, loads = ModelPool(max_models=1), Loads()
    results: list[object] = []
    start = threading.Barrier(4)

    def ask():
        start.wait()
        results.append(pool.get("tiny", loads(tiny)))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(results) == 4 and all(r is results[0] for r in results)
    assert loads.calls == ["tiny-llama:float32"]


def test_clear_drops_and_closes_every_model(tiny):
    pool, loads = ModelPool(max_models=2), Loads()
    first = pool.get("tiny", loads(tiny))
    pool.clear()
    assert "tiny" not in pool and first.model is None
    pool.get("tiny", loads(tiny))
    assert len(loads.calls) == 2


@pytest.mark.parametrize("bad", [0, -1])
def test_the_pool_needs_room_for_one_model(bad):
    with pytest.raises(ValueError, match="max_models must be at least 1"):
        ModelPool(max_models=bad)
