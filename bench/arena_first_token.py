"""Time from Send to the first text of both sides of a battle while an evaluation and a judge run.

The demo's setup as `make demo` makes it (embedded defaults: SQLite, the filesystem broker, the SQLite
channel layer; SmolLM2 evaluated on the demo's suite, the demo's judge runs and audit queued), then
battles started one after another, each timed from its creation (what Send does) to the first
``battle.delta`` event of each side on the battle's channel group, as the page receives them. Two worker
layouts, each on a fresh copy of that setup, measured in the same run:

- ``shared`` (before issue 51): one worker, three slots, every queue (``default,generate,evaluate,judge``);
- ``split`` (``make demo`` now): a worker of the arena's own (``-Q generate``, two slots, its models
  loaded as it starts: ``ARENA_WORKER_PRELOAD``) beside the background one (``-Q default,evaluate,judge``,
  two slots, ``nice 10``).

    OMP_NUM_THREADS=1 .venv/bin/python bench/arena_first_token.py [--battles 3] [--cap 300]

Prints one row per battle and layout, then the medians and their ratio (shared / split). A battle
whose sides have not both started within ``--cap`` seconds counts as ``--cap`` (shown with ``>``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable  # the project's virtual environment (.venv/bin/python)
CELERY = str(Path(sys.executable).parent / "celery")
DEMO_SUITE = '[{"task": "mmlu", "num_fewshot": 5, "limit": 2}, {"task": "gsm8k", "num_fewshot": 5, "limit": 4}]'
PROMPTS = [
    "Name three rivers in Europe and one fact about each.",
    "Explain in two sentences why the sky is blue.",
    "Write a haiku about a lighthouse.",
    "What is the difference between a list and a tuple in Python?",
    "Suggest a name for a bakery that sells only bread.",
]
LAYOUTS = {
    "shared": [["--concurrency", "3", "--beat", "-Q", "default,generate,evaluate,judge"]],
    "split": [
        ["preload", "--concurrency", "2", "-Q", "generate"],
        ["nice", "--concurrency", "2", "--beat", "-Q", "default,evaluate,judge"],
    ],
}


def demo_env(var_dir: Path, models_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL", "DATABASE_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        PODIUM_VAR_DIR=str(var_dir),
        PODIUM_MODELS_DIR=str(models_dir),
        PODIUM_DATA_DIR=os.environ.get("PODIUM_DATA_DIR", str(REPO.parent / "shared" / "data")),
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        LEADERBOARD_MODEL_STORE=str(models_dir),
        LEADERBOARD_SUITE_NAME="podium-demo",
        LEADERBOARD_SUITE_TASKS=DEMO_SUITE,
        LEADERBOARD_PROBE_LIMIT="8",
        ARENA_CATEGORY_TAGGER="",
        PYTHONPATH=str(REPO),
    )
    return env


def manage(env: dict, *args: str) -> None:
    subprocess.run([PY, "manage.py", *args], cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)


def setup(env: dict, models_dir: Path) -> None:
    """What scripts/demo.sh runs before it starts the processes."""
    manage(env, "migrate", "--no-input")
    subprocess.run([PY, "scripts/fetch_smollm2.py", str(models_dir / "SmolLM2-135M-Instruct")], cwd=REPO, env=env,
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    manage(env, "demo_seed")
    manage(env, "arena_models_sync", "config/arena_models.demo.yaml")
    manage(env, "demo_judge", "--backend", "hf")


def start_workers(env: dict, layout: str, log_dir: Path) -> list[subprocess.Popen]:
    processes = []
    for index, spec in enumerate(LAYOUTS[layout]):
        nice, preload = spec[0] == "nice", spec[0] == "preload"
        args = spec[1:] if nice or preload else spec
        command = [CELERY, "-A", "workers", "worker", "--loglevel", "INFO", "--hostname", f"bench{index}@%h", *args]
        if "--beat" in args:
            command += ["--schedule", str(Path(env["PODIUM_VAR_DIR"]) / "celerybeat-schedule")]
        if nice:
            command = ["nice", "-n", "10", *command]
        log = open(log_dir / f"worker-{layout}-{index}.log", "w")  # noqa: SIM115 - closed with the process
        process_env = {**env, "ARENA_WORKER_PRELOAD": "true" if preload else "false"}
        processes.append(subprocess.Popen(command, cwd=REPO, env=process_env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))  # fmt: skip
    return processes


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 20
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


MEASURE = r'''
import asyncio, json, sys, time
import django
django.setup()
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from arena.play.battles import battle_create
from arena.play.streams import battle_group
from leaderboard.models import JudgeRun, Submission

cap, prompts = float(sys.argv[1]), json.loads(sys.argv[2])
# Wait until the background work runs: the evaluation and a judge run have started.
deadline = time.monotonic() + 600
while time.monotonic() < deadline:
    evaluating = Submission.objects.filter(status="RUNNING").exists()
    judging = JudgeRun.objects.filter(status="RUNNING").exists()
    if evaluating and judging:
        break
    time.sleep(1)
background = {"evaluating": Submission.objects.filter(status="RUNNING").exists(),
              "judging": JudgeRun.objects.filter(status="RUNNING").exists()}
layer = get_channel_layer()

async def receive(channel, timeout):
    return await asyncio.wait_for(layer.receive(channel), timeout)

rows = []
for k, prompt in enumerate(prompts):
    channel = async_to_sync(layer.new_channel)()
    with transaction.atomic():  # both answers are queued when this commits, after the subscription
        battle = battle_create(prompt=prompt, session_hash=f"bench-{k}", ip_hash="bench")
        async_to_sync(layer.group_add)(battle_group(battle.public_id), channel)
        sent = time.monotonic()
    first, over = {}, set()
    while len(over) < 2 and time.monotonic() - sent < cap:
        try:
            event = async_to_sync(receive)(channel, 1.0)
        except asyncio.TimeoutError:
            continue
        side = event.get("side")
        if event["type"] == "battle.delta" and side not in first:
            first[side] = time.monotonic() - sent
        elif event["type"] in ("battle.done", "battle.error"):
            over.add(side)
            first.setdefault(side, time.monotonic() - sent)
    both = max(first.values()) if len(first) == 2 else None
    rows.append({"first_a": first.get("a"), "first_b": first.get("b"), "both": both,
                 "done": time.monotonic() - sent if len(over) == 2 else None})
print(json.dumps({"background": background, "rows": rows}))
'''


def measure(env: dict, battles: int, cap: float) -> dict:
    import json

    prompts = [PROMPTS[k % len(PROMPTS)] for k in range(battles)]
    done = subprocess.run([PY, "-c", MEASURE, str(cap), json.dumps(prompts)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def shown(value: float | None, cap: float) -> str:
    return f">{cap:.0f}" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--battles", type=int, default=3, help="battles per layout, one after another")
    parser.add_argument("--cap", type=float, default=300.0, help="seconds a battle may wait for its first texts")
    parser.add_argument("--layouts", default="split,shared", help="which layouts, in this order")
    parser.add_argument("--keep", action="store_true", help="keep the temporary var folders and logs")
    args = parser.parse_args()
    models_dir = REPO / "var" / "models"
    results = {}
    for layout in args.layouts.split(","):
        var_dir = Path(tempfile.mkdtemp(prefix=f"podium-ttft-{layout}-"))
        env = demo_env(var_dir, models_dir)
        print(f"{layout}: setting up the demo in {var_dir}", flush=True)
        setup(env, models_dir)
        processes = start_workers(env, layout, var_dir)
        preloads = sum(spec[0] == "preload" for spec in LAYOUTS[layout]) * 2  # two slots each
        if preloads:  # a started demo: the arena worker has loaded its models (make demo prints its URL first)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                logs = "".join(path.read_text() for path in var_dir.glob(f"worker-{layout}-*.log"))
                if logs.count("preloaded ") >= preloads:
                    break
                time.sleep(1)
        try:
            results[layout] = measure(env, args.battles, args.cap)
        finally:
            stop(processes)
            if not args.keep:
                shutil.rmtree(var_dir, ignore_errors=True)
        for k, row in enumerate(results[layout]["rows"]):
            print(f"{layout:7s} battle {k + 1}: first text A {shown(row['first_a'], args.cap)} s, "
                  f"B {shown(row['first_b'], args.cap)} s, both {shown(row['both'], args.cap)} s, "
                  f"both answers done {shown(row['done'], args.cap)} s "
                  f"(running at the start: {results[layout]['background']})", flush=True)  # fmt: skip
    medians = {
        layout: statistics.median(row["both"] if row["both"] is not None else args.cap for row in result["rows"])
        for layout, result in results.items()
    }
    for layout, value in medians.items():
        print(f"median time to the first text of both sides, {layout}: {value:.1f} s")
    if {"shared", "split"} <= medians.keys():
        print(f"ratio shared / split: {medians['shared'] / medians['split']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
