"""Speed and parity of log-prob judging against a plain transformers loop.

Same model, same prompts, same process, alternating peer and ours over ``--rounds`` slices of the
pairs, judged in both orders with the bundled ``alpacaeval-logprob`` protocol. Two workloads:

- ``--workload audit`` (default): LLMBar pairs, as ``judge audit`` judges them (a pair's two orders
  share their question);
- ``--workload panel``: what a judge panel costs (no peer loop; the ratios are between the panel's judges):
  two judges, SmolLM2 through the ``hf`` backend and the same model behind ``python -m evalcore serve``
  through the ``openai`` backend (started here), both with ``alpacaeval-logprob``, judge the same LLMBar
  pairs in both orders, each through :class:`evalcore.judging.cost.MeteredBackend`, alternating over
  ``--rounds`` slices of the pairs (which judge goes first changes every slice); prints seconds and
  prompt / completion tokens per 1,000 judgments for each judge and for the panel (the two together),
  the panel's pooled Bradley-Terry agreement between the judges, and max |p_first difference| between
  the two engines (the same model: must be <= 1e-4). Writes ``bench/out/judging_panel.json``.
- ``--workload run``: the static-score workload of ``judge run``, built from real answers: MT-Bench's
  human-judgment file holds up to six models' answers to each of its questions; the first answer of
  each question (in file order) plays the baseline and every other answer a candidate model, and the
  prompts are keyed by (question, order) exactly as ``judge_run`` keys them (every candidate's prompt
  with the baseline's answer first shares the question and that answer).

- plain: one forward pass per judgment over the whole prompt, full logits, softmax at the last
  position (``evalcore.judging.logprob.p_first_plain``: what a hand-written loop does);
- evalcore: :func:`evalcore.judging.logprob.p_first_batched` (shared prefix run once, the two orders of
  a pair share their stem, batches by a token budget, only the last position and the two verdict rows
  of the output layer).

Also prints the ceiling of any exact method on these prompts: every distinct (prefix, token) must go
through the decoder once (the prompts' trie size), and the plain loop additionally pays the output layer
at every position; the ratio of those matmul FLOPs bounds what sharing and batching can gain.

Prints judgments per second for each, the ratio, and max |p_first difference| (must be <= 1e-4; exit
code 1 otherwise). Writes ``bench/out/judging.json``.

Usage::

    python bench/judging.py [--workload audit|run|panel] [--pairs 100] [--model DIR] [--device cpu|cuda]
                              [--threads 2] [--budget N] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOLERANCE = 1e-4


def trie_tokens(prompts) -> int:
    """Distinct prefixes over all prompts: what an exact method must run through the decoder."""
    total, previous = 0, ()
    for row in sorted(tuple(p) for p in prompts):
        common = 0
        while common < min(len(row), len(previous)) and row[common] == previous[common]:
            common += 1
        total, previous = total + len(row) - common, row
    return total


def flop_ceiling(model, prompts) -> float:
    """Plain loop's matmul FLOPs over an exact method's minimum (attention ignored)."""
    head = model.get_output_embeddings().weight.numel()
    body = sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()
    if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        body -= head
    plain = sum(len(p) for p in prompts) * (body + head)
    return plain / (trie_tokens(prompts) * body)


def run_workload(path: str, limit: int):
    """(pairs, group keys) of a judge run against a baseline, from a file with several answers per question.

    Questions come in file order; each contributes (its distinct answers - 1) pairs, baseline first as
    ``answer_1`` (as ``judge_run`` builds them); ``limit`` bounds the number of pairs (whole questions).
    """
    from evalcore.judging import read_pairs
    from evalcore.judging.records import PairItem

    answers: dict[str, list[str]] = {}
    for pair in read_pairs(path):
        seen = answers.setdefault(pair.question, [])
        seen.extend(a for a in (pair.answer_1, pair.answer_2) if a not in seen)
    pairs, keys = [], []
    for k, (question, texts) in enumerate(answers.items()):
        if len(texts) < 3 or len(pairs) >= limit:  # a baseline and at least two candidates
            continue
        for m, text in enumerate(texts[1:]):
            pairs.append(PairItem(f"m{m}/{k}", question, texts[0], text))
            keys.append(k)
    return pairs, keys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data = Path(os.environ.get("PODIUM_DATA_DIR", ROOT.parent / "shared" / "data"))
    models = Path(os.environ.get("PODIUM_MODELS_DIR", ROOT / "var" / "models"))
    parser.add_argument("--workload", choices=("audit", "run", "panel"), default="audit")
    parser.add_argument("--pairs", type=int, default=100, help="pairs (each judged in both orders)")
    parser.add_argument("--pairs-file", default=None,
                        help="default: judges/llmbar_natural.json (audit), judges/mtbench_human_majority.json (run)")  # fmt: skip
    parser.add_argument("--model", default=str(models / "SmolLM2-135M-Instruct"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--budget", type=int, default=None, help="token budget per pass (default: judge_pairs' own)")
    parser.add_argument("--rounds", type=int, default=4, help="alternate peer and ours over this many slices")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "judging.json"))
    args = parser.parse_args()

    import torch

    from evalcore.judging import load_protocol, read_pairs
    from evalcore.judging.judge import CPU_TOKEN_BUDGET, order_messages
    from evalcore.judging.logprob import p_first_batched, p_first_plain, prompt_token_ids
    from evalcore.models import load_backend

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.workload == "panel":
        return panel_cost(args, data)
    judge = load_backend("hf", path=args.model, dtype="float32", device=args.device)
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    token_ids = protocol.verdict_token_ids(judge.tokenizer)
    default_file = "llmbar_natural.json" if args.workload == "audit" else "mtbench_human_majority.json"
    pairs_file = args.pairs_file or str(data / "judges" / default_file)
    if args.workload == "audit":
        pairs = read_pairs(pairs_file)[: args.pairs]
        keys = [pair.pair_id for pair in pairs]
    else:
        pairs, keys = run_workload(pairs_file, args.pairs)
    prompts, groups = [], []
    for pair, key in zip(pairs, keys):
        for order in ("ab", "ba"):
            prompts.append(prompt_token_ids(judge.tokenizer, order_messages(protocol, pair, order), protocol.verdict.prefix))
            groups.append(key if args.workload == "audit" else (key, order))
    budget = args.budget or (CPU_TOKEN_BUDGET if judge.device.type == "cpu" else 65536)
    p_first_plain(judge.model, prompts[0][:64], token_ids)  # warm-up
    p_first_batched(judge.model, [prompts[0][:64]], token_ids)
    load_before = os.getloadavg()[0]
    plain, batched, plain_s, batched_s = [], [], 0.0, 0.0
    # Alternate peer and ours over slices so that load drift hits both; a slice holds whole groups
    # (a pair's two orders; in the run workload, a question's every pair), so no sharing is cut.
    per_round = -(-len(prompts) // max(1, args.rounds))
    slices, lo = [], 0
    while lo < len(prompts):
        hi = min(lo + per_round, len(prompts))
        while hi < len(prompts) and keys[hi // 2] == keys[(hi - 1) // 2]:
            hi += 1
        slices.append((lo, hi))
        lo = hi
    for lo, hi in slices:
        chunk, chunk_groups = prompts[lo:hi], groups[lo:hi]
        start = time.perf_counter()
        plain += [p_first_plain(judge.model, ids, token_ids) for ids in chunk]
        plain_s += time.perf_counter() - start
        start = time.perf_counter()
        batched += list(p_first_batched(judge.model, chunk, token_ids, groups=chunk_groups, token_budget=budget,
                                        pad_id=judge.pad_token_id))
        batched_s += time.perf_counter() - start
    diff = max(abs(a - b) for a, b in zip(plain, batched))
    summary = {
        "workload": args.workload, "pairs_file": pairs_file, "questions": len(set(keys)),
        "pairs": len(pairs), "judgments": len(prompts), "prompt_tokens": sum(len(p) for p in prompts),
        "device": str(judge.device), "threads": torch.get_num_threads(), "token_budget": budget,
        "rounds": args.rounds,
        "plain_seconds": plain_s, "evalcore_seconds": batched_s,
        "plain_judgments_per_s": len(prompts) / plain_s, "evalcore_judgments_per_s": len(prompts) / batched_s,
        "ratio": plain_s / batched_s, "max_abs_p_first_diff": diff,
        "trie_tokens": trie_tokens(prompts), "exact_flop_ceiling": flop_ceiling(judge.model, prompts),
        "load_average_before": load_before, "load_average_after": os.getloadavg()[0],
    }  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"workload {args.workload}: {len(set(keys))} questions, "
          f"{len(pairs)} pairs x 2 orders = {len(prompts)} judgments, {summary['prompt_tokens']} prompt tokens, "
          f"{summary['device']}, {summary['threads']} threads")
    print(f"plain transformers loop: {plain_s:8.2f} s  {summary['plain_judgments_per_s']:7.2f} judgments/s")
    print(f"evalcore judging:        {batched_s:8.2f} s  {summary['evalcore_judgments_per_s']:7.2f} judgments/s")
    print(f"exact-method ceiling: {summary['trie_tokens']} distinct prefix tokens, "
          f"{summary['exact_flop_ceiling']:.2f}x fewer matmul FLOPs than the plain loop")
    print(f"ratio {summary['ratio']:.2f}x   max |p_first diff| {diff:.2e}   load {load_before:.1f} -> {summary['load_average_after']:.1f}")
    return 0 if diff <= TOLERANCE else 1


def start_serve(model_dir: str, threads: int):
    """``python -m evalcore serve`` on a free port with the same model; (process, base_url)."""
    import re
    import subprocess
    import tempfile

    log = tempfile.NamedTemporaryFile("w+", prefix="bench-serve-", suffix=".log", delete=False)
    command = [sys.executable, "-m", "evalcore", "serve", "--model", "hf", "--model-args",
               f"path={model_dir},dtype=float32,device=cpu,threads={threads}", "--port", "0"]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        match = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", Path(log.name).read_text())
        if match:
            return process, match.group(1), log.name
        time.sleep(0.2)
    process.terminate()
    raise RuntimeError(f"evalcore serve did not start:\n{Path(log.name).read_text()[-2000:]}")


def panel_cost(args, data: Path) -> int:
    """Seconds and tokens per 1,000 judgments of a two-judge panel (see the module docs)."""
    import torch

    from evalcore.judging import judge_pairs, load_protocol, read_pairs
    from evalcore.judging.cost import MeteredBackend, cost_per_1000, logprob_prompt_tokens
    from evalcore.judging.panel import panel_pairwise
    from evalcore.models import load_backend

    threads = torch.get_num_threads()
    pairs = read_pairs(args.pairs_file or str(data / "judges" / "llmbar_natural.json"))[: args.pairs]
    process, url, log = start_serve(args.model, threads)
    try:
        judges = {
            "hf": load_backend("hf", path=args.model, dtype="float32", device=args.device),
            "serve": load_backend("openai", base_url=url, tokenizer=args.model, top_logprobs=20),
        }
        protocol = load_protocol("alpacaeval-logprob", tokenizer=judges["hf"].tokenizer)
        warm = [pairs[0]]
        for backend in judges.values():  # warm-up: first-call costs (threads, connection) out of the figure
            judge_pairs(backend, protocol, warm)
        load_before = os.getloadavg()[0]
        # Alternate the judges over slices of the pairs (the first judge changes every slice), so that a
        # change in the machine's load hits both.
        metered = {name: MeteredBackend(backend) for name, backend in judges.items()}
        judged = {name: [] for name in judges}
        step = -(-len(pairs) // max(1, args.rounds))
        for k, lo in enumerate(range(0, len(pairs), step)):
            for name in (list(judges) if k % 2 == 0 else list(reversed(judges))):
                with metered[name]:
                    judged[name] += judge_pairs(metered[name], protocol, pairs[lo : lo + step])
        results, votes, p_first = {}, {}, {}
        for name, backend in judges.items():
            meter, judgments = metered[name], judged[name]
            if meter.prompt_tokens is None:  # log-prob verdicts on the model directly: count their prompts
                meter.add_tokens(prompt=logprob_prompt_tokens(backend.tokenizer, protocol, pairs, judgments=judgments))
            failed = [j for j in judgments if not j.ok]
            if failed:
                print(f"{name}: {len(failed)} judgments failed; first: {failed[0].error}")
                return 1
            made = sum(not j.cached for j in judgments)
            results[name] = {**meter.as_dict(), **cost_per_1000(seconds=meter.seconds, judgments=made,
                             prompt_tokens=meter.prompt_tokens, completion_tokens=meter.completion_tokens)}  # fmt: skip
            p_first[name] = [j.p_first for j in judgments]
            votes[name] = [("answer_1", "answer_2", f"{j.pair_id}/{j.order}", j.p_first if j.order == "ab"
                            else 1.0 - j.p_first) for j in judgments]  # fmt: skip
        judges["hf"].close()
        judges["serve"].close()
    finally:
        process.terminate()
        process.wait(timeout=30)
        Path(log).unlink(missing_ok=True)
    per = [results[n] for n in judges]
    panel = {k: sum(r[k] for r in per) if all(r[k] is not None for r in per) else None
             for k in ("seconds_per_1000", "prompt_tokens_per_1000", "completion_tokens_per_1000")}  # fmt: skip
    diff = max(abs(a - b) for a, b in zip(p_first["hf"], p_first["serve"]))
    cheapest = min(per, key=lambda r: r["seconds_per_1000"])
    summary = {
        "workload": "panel", "pairs": len(pairs), "judgments_per_judge": 2 * len(pairs), "threads": threads,
        "protocol": protocol.name, "rounds": args.rounds, "judges": results, "panel": panel,
        "panel_over_cheapest_judge": panel["seconds_per_1000"] / cheapest["seconds_per_1000"],
        "serve_over_hf": results["serve"]["seconds_per_1000"] / results["hf"]["seconds_per_1000"],
        "max_abs_p_first_diff": diff, "panel_pairwise": panel_pairwise(votes, rounds=200, seed=0),
        "load_average_before": load_before, "load_average_after": os.getloadavg()[0],
    }  # fmt: skip
    out = Path(args.out).with_name("judging_panel.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"panel workload: {len(pairs)} LLMBar pairs x 2 orders = {2 * len(pairs)} judgments per judge, "
          f"{protocol.name}, {threads} threads")
    for name, r in results.items():
        print(f"{name:6s} {r['seconds']:8.2f} s  {r['seconds_per_1000']:9.1f} s/1000  "
              f"{r['prompt_tokens_per_1000']:11,.0f} prompt + {r['completion_tokens_per_1000']:7,.0f} completion tokens/1000")
    print(f"panel  {panel['seconds_per_1000']:20.1f} s/1000  {panel['prompt_tokens_per_1000']:11,.0f} prompt + "
          f"{panel['completion_tokens_per_1000']:7,.0f} completion tokens/1000")
    print(f"panel / cheapest judge {summary['panel_over_cheapest_judge']:.2f}x   serve / hf {summary['serve_over_hf']:.2f}x   "
          f"max |p_first diff| {diff:.2e}   load {load_before:.1f} -> {summary['load_average_after']:.1f}")
    return 0 if diff <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
