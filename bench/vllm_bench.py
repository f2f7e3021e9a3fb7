"""The vllm backend against the hf backend and a plain transformers loop.

Workloads (``--workload arena|judges|all``):

- ``arena``: ``--battles`` (16) concurrent battles, each a thread streaming one greedy answer of up to
  ``--tokens`` (256) new tokens to a different real prompt (MT-Bench's questions), as a threads-pool
  worker runs them: vLLM's engine batches the streams; the hf backend streams each one on its own (its
  arena path has no cross-request batching). Prints tokens/s, time to first token p50/p99 (from the
  moment all battles arrive), whether every answer is the same text on both, and the ratio; for an
  answer that differs, where it parts and the hf model's log-probability gap between the two tokens there.
- ``judges``: the audit workload of ``bench/judging.py`` (LLMBar pairs, both orders, the bundled
  ``alpacaeval-logprob`` protocol): vLLM's exact next-token log-probabilities (``next_token_logprobs``)
  against the plain transformers loop (one forward pass per judgment); max |p_first difference| must be
  <= 1e-4.

- ``compile``: eager mode (the CPU default) against vLLM's compiled mode end to end: engine start plus
  the arena's battles on each (``all`` leaves it out: a compiled load takes minutes here).
- ``intervals``: the battles streamed with each of ``--intervals`` (vLLM's ``stream_interval``: tokens
  per delta) and through raw ``vllm.LLM.generate``, alternating for ``--rounds`` rounds: the cost of
  waking every stream's thread after each engine step, where steps are short (a GPU; on CPU, a tiny model).
- ``raw``: the same battles through vLLM's own offline API (``vllm.LLM.generate`` on the same token-id
  prompts, one batch) against Podium's backend (the battles as concurrent streams): what Podium's
  engine loop and streaming cost over raw vLLM (goal on a GPU: within 10%; ``bench/gpu.sh``).

``arena``, ``judges``, ``raw`` and ``all`` run each side (the hf backend or plain loop, Podium's vllm backend,
raw vLLM) in a process of its own (``--processes separate``, the
default; ``bench/vllm_sides.py``): in one process the hf side runs beside the vLLM engine's OpenMP team and
is slowed by it (``--processes one`` keeps that layout, as ``bench/gpu.sh`` uses on a GPU). ``--repeat N``
alternates which side goes first and reports medians; ``--preload vllm`` starts the vLLM side with
tcmalloc, as Podium's vLLM worker starts (``scripts/vllm_preload.sh``).

Also the engine's start (load) time, the process's peak RSS and the KV cache vLLM allocated. The
benchmark engine's workloads (GSM8K, BBH date_understanding, MMLU against lm-eval 0.4.13, and lm-eval's own
``--model vllm``) run in ``bench/engine_parity.py --podium-backend vllm`` (docs/PERFORMANCE.md).

Usage::

    python bench/vllm_bench.py [--workload all] [--battles 16] [--tokens 256] [--pairs 40] [--threads 2]
                         [--device cpu|cuda] [--model DIR] [--kv-cache-gb 1] [--stream-interval N]
                         [--processes separate|one] [--repeat N] [--preload none|vllm|both]
                         [--out bench/out/vllm.json]

Exit code 1 when a parity check fails (texts differ, or p_first differs by more than 1e-4).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOLERANCE = 1e-4


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def arena_prompts(data: Path, n: int) -> list[str]:
    """n distinct real user questions (MT-Bench's, from the human-judgment file)."""
    seen: list[str] = []
    for row in json.loads((data / "judges" / "mtbench_human_majority.json").read_text()):
        question = str(row["input"]).strip()
        if question not in seen:
            seen.append(question)
        if len(seen) == n:
            break
    return seen


def battles(backend, prompts: list[str], tokens: int) -> dict:
    """Every prompt streamed at once, one thread each; times measured from the common start."""
    params = {"max_new_tokens": tokens, "temperature": 0.0}
    texts, first, done = [""] * len(prompts), [0.0] * len(prompts), [0.0] * len(prompts)
    failures: list[BaseException] = []
    barrier = threading.Barrier(len(prompts) + 1)

    def one(i: int) -> None:
        barrier.wait()
        pieces = []
        try:
            for delta in backend.stream_chat([{"role": "user", "content": prompts[i]}], params):
                if not pieces:
                    first[i] = time.perf_counter() - start
                pieces.append(delta)
        except Exception as exc:  # noqa: BLE001 - reported below, after every battle has ended
            failures.append(exc)
        done[i] = time.perf_counter() - start
        texts[i] = "".join(pieces)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{len(failures)} of {len(prompts)} battles failed on {backend.name}: {failures[0]!r}")
    seconds = max(done)
    generated = sum(len(backend.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
    return {
        "seconds": seconds, "tokens": generated, "tokens_per_s": generated / seconds,
        "ttft_p50_s": statistics.median(first), "ttft_p99_s": percentile(first, 99), "texts": texts,
    }  # fmt: skip


def divergences(hf, prompts: list[str], ours: list[str], theirs: list[str]) -> list[dict]:
    """Where each pair of greedy answers that differ parts, and how close the choice was there: the hf
    model's log-probabilities (float32) of the two tokens at the first token that differs, after the
    prompt and the shared part. A gap of a few 1e-5 is a near-tie that another kernel's summation order
    may flip; a large one is a fault. Texts are re-tokenised, so the first differing token is that of the
    texts as the tokenizer splits them."""
    import torch

    found = []
    for index, (prompt, a, b) in enumerate(zip(prompts, ours, theirs)):
        if a == b:
            continue
        a_ids, b_ids = hf.tok_encode(a), hf.tok_encode(b)
        at = next((i for i, (x, y) in enumerate(zip(a_ids, b_ids)) if x != y), min(len(a_ids), len(b_ids)))
        context = hf.chat_prompt_ids([{"role": "user", "content": prompt}]) + a_ids[:at]
        with torch.inference_mode():
            logits = hf.model(torch.tensor([context], device=hf.model.device)).logits[0, -1].float()
        logprobs = torch.log_softmax(logits, -1)
        pick = [ids[at] if at < len(ids) else None for ids in (a_ids, b_ids)]
        values = [float(logprobs[t]) if t is not None else None for t in pick]
        gap = abs(values[0] - values[1]) if None not in values else None
        found.append({"battle": index, "token": at, "vllm_token": pick[0], "hf_token": pick[1],
                      "vllm_logprob": values[0], "hf_logprob": values[1], "gap": gap})  # fmt: skip
    return found


def judge_workload(data: Path, tokenizer, pairs: int):
    from evalcore.judging import load_protocol, read_pairs
    from evalcore.judging.judge import order_messages
    from evalcore.judging.logprob import prompt_token_ids

    protocol = load_protocol("alpacaeval-logprob", tokenizer=tokenizer)
    items = read_pairs(data / "judges" / "llmbar_natural.json")[:pairs]
    prompts = [
        prompt_token_ids(tokenizer, order_messages(protocol, pair, order), protocol.verdict.prefix)
        for pair in items
        for order in ("ab", "ba")
    ]
    return prompts, protocol.verdict_token_ids(tokenizer)


def verdicts(found: list) -> list[float]:
    """p_first of each judgment from vLLM's two verdict log-probabilities, as the judge computes it
    (:func:`evalcore.judging.judge.p_first_of`); the first failed or impossible judgment ends the bench."""
    from evalcore.judging.judge import p_first_of

    p_first = [p_first_of(item) for item in found]
    failed = [item for item in p_first if isinstance(item, Exception)]
    if failed:  # each judgment carries its own failure; the first one says why
        raise SystemExit(f"judges: {len(failed)} of {len(found)} judgments failed on vLLM: {failed[0]!r}")
    return p_first


def raw_llm(engine_args: dict):
    """Raw ``vllm.LLM`` with Podium's engine arguments (``EngineSettings.as_engine_args``)."""
    from vllm import LLM

    return LLM(**{k: v for k, v in engine_args.items() if k != "disable_log_stats"})


def raw_engine(backend, prompts: list[str], tokens: int):
    """A second engine with the backend's settings, as raw ``vllm.LLM``, warmed up: (llm, the prompts' token
    ids as the backend renders them, greedy params). Keep it until the end: its teardown ends the other."""
    from vllm import SamplingParams

    llm = raw_llm(backend.settings.as_engine_args(backend.path))
    ids = [backend.tok_encode(backend.chat_context([{"role": "user", "content": p}])) for p in prompts]
    params = SamplingParams(max_tokens=tokens, temperature=0.0)
    llm.generate([{"prompt_token_ids": ids[0]}], params, use_tqdm=False)  # warm-up
    return llm, ids, params


def raw_vllm(backend, prompts: list[str], args) -> dict:
    """The battles' prompts through ``vllm.LLM.generate`` in one call (a second engine with the same
    settings), against the same prompts streamed through Podium's backend."""
    battles(backend, prompts[:2], 8)  # warm-up, as the raw engine gets one below
    ours = battles(backend, prompts, args.tokens)  # first: the raw engine's teardown would end ours
    ours_tokens = sum(len(backend.tok_encode(t)) for t in ours["texts"])
    llm, ids, params = raw_engine(backend, prompts, args.tokens)
    start = time.perf_counter()
    outputs = llm.generate([{"prompt_token_ids": row} for row in ids], params, use_tqdm=False)
    raw_s = time.perf_counter() - start
    raw_tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    raw_texts = [o.outputs[0].text for o in outputs]
    return {"raw_seconds": raw_s, "raw_tokens_per_s": raw_tokens / raw_s, "podium_seconds": ours["seconds"],
            "podium_tokens_per_s": ours_tokens / ours["seconds"],
            "ratio": (ours_tokens / ours["seconds"]) / (raw_tokens / raw_s),
            "identical_texts": sum(a == b for a, b in zip(raw_texts, ours["texts"]))}  # fmt: skip


def stream_intervals(backend, prompts: list[str], args) -> dict:
    """The battles streamed with each ``--intervals`` value (vLLM's per-request stream_interval, one engine),
    and through raw ``vllm.LLM.generate`` (a second engine), alternating for ``--rounds`` rounds: what
    waking every stream's thread after each engine step costs, where steps are short (a GPU, or a tiny
    model on CPU). Ratios are of medians, against raw vLLM on the same prompts."""
    import dataclasses

    battles(backend, prompts[:2], 8)  # warm-up
    llm, ids, params = raw_engine(backend, prompts, args.tokens)
    loaded, seconds, raw_seconds, same = backend.settings, {n: [] for n in args.intervals}, [], {}
    for _ in range(args.rounds):
        for n in args.intervals:
            backend.settings = dataclasses.replace(loaded, stream_interval=n)
            ours = battles(backend, prompts, args.tokens)
            seconds[n].append(ours["seconds"])
        backend.settings = loaded
        start = time.perf_counter()
        outputs = llm.generate([{"prompt_token_ids": row} for row in ids], params, use_tqdm=False)
        raw_seconds.append(time.perf_counter() - start)
        same[n] = sum(o.outputs[0].text == t for o, t in zip(outputs, ours["texts"]))
    tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    raw_s = statistics.median(raw_seconds)
    rows = {n: {"median_seconds": statistics.median(s), "seconds": s,
                "of_raw": raw_s / statistics.median(s)} for n, s in seconds.items()}  # fmt: skip
    return {"battles": len(prompts), "tokens": tokens, "steps_per_s_raw": args.tokens / raw_s,
            "raw_median_seconds": raw_s, "raw_seconds": raw_seconds, "intervals": rows,
            "identical_texts_last_interval": same}  # fmt: skip


def engine_args(args) -> dict:
    """The vllm backend's engine arguments for the bench's options. On a GPU the raw-vLLM workload starts a
    second engine beside ours: each takes 40% of the card."""
    found = {"kv_cache_gb": args.kv_cache_gb} if args.device == "cpu" else {"gpu_memory_utilization": 0.4}
    if args.enforce_eager:
        found["enforce_eager"] = True
    if args.stream_interval is not None:
        found["stream_interval"] = args.stream_interval
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data = Path(os.environ.get("PODIUM_DATA_DIR", ROOT.parent / "shared" / "data"))
    models = Path(os.environ.get("PODIUM_MODELS_DIR", ROOT / "var" / "models"))
    parser.add_argument("--workload", choices=("arena", "judges", "raw", "compile", "intervals", "all"), default="all")
    parser.add_argument("--plan", action="store_true", help="check the arguments, print the plan, load nothing")
    parser.add_argument("--battles", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--pairs", type=int, default=40, help="LLMBar pairs for the judge workload (x 2 orders)")
    parser.add_argument("--model", default=str(models / "SmolLM2-135M-Instruct"))
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kv-cache-gb", type=float, default=1.0, help="vLLM's KV cache on CPU")
    parser.add_argument("--enforce-eager", action="store_true", help="eager mode on a GPU too (default there: compiled)")
    parser.add_argument("--intervals", type=lambda v: [int(x) for x in v.split(",")], default=[1, 4, 8, 16],
                        help="stream intervals the 'intervals' workload compares (comma-separated)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the 'intervals' workload")
    parser.add_argument("--stream-interval", type=int, default=None,
                        help="tokens per streamed delta (vLLM's stream_interval; default: the backend's for the device)")
    parser.add_argument("--processes", choices=("separate", "one"), default="separate",
                        help="arena, judges, raw, all: each side in its own process (default), or all in this one")
    parser.add_argument("--repeat", type=int, default=1, help="separate processes: rounds, alternating which side goes first")
    parser.add_argument("--preload", choices=("none", "vllm", "both"), default="none",
                        help="separate processes: start the vllm side (or both) with tcmalloc in LD_PRELOAD")
    parser.add_argument("--role", choices=("hf", "vllm", "raw"), help=argparse.SUPPRESS)  # a child of --processes separate
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "vllm_bench.json"))
    args = parser.parse_args()
    if min(args.battles, args.tokens, args.pairs, args.threads, args.rounds, args.repeat, *args.intervals) < 1 or not args.kv_cache_gb > 0:
        parser.error("--battles, --tokens, --pairs, --threads, --rounds, --repeat and --intervals must be at least 1, "
                     "--kv-cache-gb positive")  # fmt: skip
    separate = args.processes == "separate" and args.workload in ("arena", "judges", "raw", "all")
    if not separate and (args.repeat != 1 or args.preload != "none"):
        parser.error("--repeat and --preload need separate processes (--workload arena, judges, raw or all)")
    if args.plan:
        print(f"plan: workload {args.workload}, {args.battles} battles x {args.tokens} tokens, {args.pairs} pairs, "
              f"{args.model} on {args.device}, {args.threads} threads, stream intervals {args.intervals} x {args.rounds} "
              f"rounds, {'separate processes x ' + str(args.repeat) if separate else 'one process'}, "
              f"preload {args.preload} -> {args.out}")  # fmt: skip
        return 0
    if args.role or separate:
        import vllm_sides

        if args.role:
            found = vllm_sides.side(args, data, sys.modules[__name__])
            Path(args.out).write_text(json.dumps(found) + "\n")
            return 0
        summary, ok = vllm_sides.separate(args, data, sys.modules[__name__])
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
        return 0 if ok else 1

    import torch

    from evalcore.judging.logprob import p_first_plain
    from evalcore.models import load_backend

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    hf = load_backend("hf", path=args.model, dtype="float32", device=args.device)
    hf_load_s = time.perf_counter() - started
    rss_after_hf = peak_rss_mb()
    kwargs = engine_args(args)
    started = time.perf_counter()
    vllm = load_backend("vllm", path=args.model, device=args.device, max_num_seqs=max(16, args.battles), **kwargs)
    vllm_load_s = time.perf_counter() - started
    cache = vllm.loop.engine.vllm_config.cache_config
    summary: dict = {
        "device": args.device, "threads": args.threads, "model": Path(args.model).name,
        "engine_args": {**vllm.settings.as_dict(), "stream_interval": vllm.settings.stream_interval},
        "load_s": {"hf": hf_load_s, "vllm": vllm_load_s},
        "kv_cache": {"blocks": cache.num_gpu_blocks, "block_size": cache.block_size,
                     "tokens": (cache.num_gpu_blocks or 0) * cache.block_size,
                     "bytes": vllm.memory_plan.get("kv_cache_bytes")},
        "peak_rss_mb": {"after_hf_load": rss_after_hf, "after_vllm_load": peak_rss_mb()},
        "load_average_before": load_before,
    }  # fmt: skip
    ok = True
    if args.workload in ("arena", "all"):
        prompts = arena_prompts(data, args.battles)
        battles(vllm, prompts[:2], 8)  # warm-up
        ours = battles(vllm, prompts, args.tokens)
        theirs = battles(hf, prompts, args.tokens)
        ours_texts, hf_texts = ours.pop("texts"), theirs.pop("texts")
        same = sum(a == b for a, b in zip(ours_texts, hf_texts))
        parted = divergences(hf, prompts, ours_texts, hf_texts)
        summary["arena"] = {"battles": len(prompts), "max_new_tokens": args.tokens, "vllm": ours, "hf": theirs,
                            "identical_texts": same, "ratio": ours["tokens_per_s"] / theirs["tokens_per_s"],
                            "divergences": parted}  # fmt: skip
        ok = ok and same == len(prompts)
        print(f"arena: {len(prompts)} concurrent battles, up to {args.tokens} tokens each")
        for name, r in (("vllm", ours), ("hf", theirs)):
            print(f"  {name:5} {r['tokens']:6d} tokens in {r['seconds']:7.1f} s = {r['tokens_per_s']:7.1f} tokens/s   "
                  f"first token p50 {r['ttft_p50_s']:6.2f} s  p99 {r['ttft_p99_s']:6.2f} s")  # fmt: skip
        print(f"  ratio {summary['arena']['ratio']:.2f}x   identical texts {same}/{len(prompts)}")
        for d in parted:
            gap = "one text ended" if d["gap"] is None else f"log-prob gap {d['gap']:.1e}"
            print(f"  battle {d['battle']}: parts at token {d['token']} (vllm {d['vllm_token']}, hf {d['hf_token']}): "
                  f"{gap} in the hf model")  # fmt: skip
    if args.workload in ("judges", "all"):
        prompts, token_ids = judge_workload(data, vllm.tokenizer, args.pairs)
        p_first_plain(hf.model, prompts[0][:64], token_ids)  # warm-up
        vllm.next_token_logprobs([prompts[0][:64]], token_ids)
        start = time.perf_counter()
        plain = [p_first_plain(hf.model, ids, token_ids) for ids in prompts]
        plain_s = time.perf_counter() - start
        start = time.perf_counter()
        found = vllm.next_token_logprobs(prompts, token_ids)
        vllm_s = time.perf_counter() - start
        ours = verdicts(found)
        diff = max(abs(a - b) for a, b in zip(plain, ours))
        summary["judges"] = {"judgments": len(prompts), "prompt_tokens": sum(map(len, prompts)),
                             "plain_seconds": plain_s, "vllm_seconds": vllm_s, "ratio": plain_s / vllm_s,
                             "max_abs_p_first_diff": diff}  # fmt: skip
        ok = ok and diff <= TOLERANCE
        print(f"judges: {len(prompts)} judgments ({args.pairs} LLMBar pairs x 2 orders), "
              f"{summary['judges']['prompt_tokens']} prompt tokens")  # fmt: skip
        print(f"  plain transformers loop {plain_s:7.1f} s   vllm {vllm_s:7.1f} s   ratio {plain_s / vllm_s:.2f}x   "
              f"max |p_first diff| {diff:.1e}")  # fmt: skip
    if args.workload == "compile":
        prompts = arena_prompts(data, args.battles)
        eager = battles(vllm, prompts, args.tokens)
        started = time.perf_counter()
        compiled_backend = load_backend("vllm", path=args.model, device=args.device, enforce_eager=False,
                                        max_num_seqs=max(16, args.battles), **kwargs)  # fmt: skip
        compiled_load_s = time.perf_counter() - started
        compiled = battles(compiled_backend, prompts, args.tokens)
        same = sum(a == b for a, b in zip(eager.pop("texts"), compiled.pop("texts")))
        compiled_backend.close()
        summary["compile"] = {"eager": {**eager, "load_s": vllm_load_s}, "compiled": {**compiled, "load_s": compiled_load_s},
                              "identical_texts": same}  # fmt: skip
        for name, r in (("eager", summary["compile"]["eager"]), ("compiled", summary["compile"]["compiled"])):
            print(f"  {name:8} start {r['load_s']:6.1f} s, battles {r['seconds']:6.1f} s ({r['tokens_per_s']:6.1f} tokens/s), "
                  f"end to end {r['load_s'] + r['seconds']:6.1f} s")  # fmt: skip
        print(f"  identical texts {same}/{len(prompts)}")
    if args.workload in ("raw", "all"):  # last: it starts a second engine in this process
        summary["raw"] = raw_vllm(vllm, arena_prompts(data, args.battles), args)
        print(f"raw vLLM (LLM.generate, one batch) {summary['raw']['raw_tokens_per_s']:7.1f} tokens/s, Podium's "
              f"backend (concurrent streams) {summary['raw']['podium_tokens_per_s']:7.1f} tokens/s: "
              f"{summary['raw']['ratio']:.2f} of raw")  # fmt: skip
    if args.workload == "intervals":
        found = summary["intervals"] = stream_intervals(vllm, arena_prompts(data, args.battles), args)
        print(f"stream intervals: {found['battles']} battles, {found['tokens']} tokens; raw vLLM median "
              f"{found['raw_median_seconds']:.2f} s ({found['steps_per_s_raw']:.0f} engine steps/s)")  # fmt: skip
        for n, row in found["intervals"].items():
            print(f"  stream_interval {n:3d}: median {row['median_seconds']:.2f} s = {row['of_raw']:.2f} of raw")
    summary["peak_rss_mb"]["end"] = peak_rss_mb()
    summary["load_average_after"] = os.getloadavg()[0]
    print(f"engine start: hf {hf_load_s:.1f} s, vllm {vllm_load_s:.1f} s; KV cache {summary['kv_cache']['tokens']} "
          f"tokens; peak RSS {summary['peak_rss_mb']['end']:.0f} MB; "
          f"load {load_before:.1f} -> {summary['load_average_after']:.1f}")  # fmt: skip
    vllm.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
