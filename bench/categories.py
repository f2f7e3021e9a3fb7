"""Prompt tagging throughput (prompts/s) on the hf and vllm backends, in one process, one run.

Every prompt is tagged with the five bundled category protocols (hard prompts: 7 criteria; coding, math,
creative writing, instruction following: one each; 11 yes/no log-probability reads a prompt), as the
site's tagging queue does (``evalcore.categories.tag_prompts``, no cache), through:

- the ``hf`` backend: batched forward passes with shared stems (every criterion of a prompt shares the
  prompt, every prompt the protocol's system message);
- the ``vllm`` backend (vLLM's CPU build here): exact next-token log-probabilities of the two answer
  tokens, prefix caching on;
- a plain transformers loop (the peer): one forward pass per (prompt, criterion), full softmax.

The prompts are real user questions (MT-Bench's, from the human-judgment file). Prints prompts/s of each,
the ratios, and the parity of the three: the same tag for every prompt and max |P(yes) difference|
<= 1e-4 (exit code 1 when not).

Usage::

    OMP_NUM_THREADS=1 python bench/categories.py [--prompts 48] [--plain 16] [--threads 1] \\
        [--model DIR] [--kv-cache-gb 1] [--out bench/out/categories.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOLERANCE = 1e-4


def real_prompts(data: Path, n: int) -> list[str]:
    """n distinct real user questions (MT-Bench's)."""
    seen: list[str] = []
    for row in json.loads((data / "judges" / "mtbench_human_majority.json").read_text()):
        question = str(row["input"]).strip()
        if question not in seen:
            seen.append(question)
        if len(seen) == n:
            break
    return seen


def tag_all(backend, protocols, prompts) -> tuple[float, dict]:
    from evalcore.categories import tag_prompts

    started = time.perf_counter()
    tags = {p.category: tag_prompts(backend, p, prompts) for p in protocols}
    return time.perf_counter() - started, tags


def plain_loop(backend, protocols, prompts) -> tuple[float, dict]:
    """One full forward pass per (prompt, criterion): P(yes) / (P(yes) + P(no)) from the whole softmax."""
    from evalcore.judging.logprob import p_first_plain, prompt_token_ids

    tokenizer = backend.tokenizer
    started = time.perf_counter()
    out = {}
    for protocol in protocols:
        ids = tuple(
            tokenizer.encode(text, add_special_tokens=False)[0] for text in (protocol.yes, protocol.no)
        )
        out[protocol.category] = [
            {c.name: p_first_plain(backend.model, prompt_token_ids(tokenizer, protocol.messages(prompt),
                                                                   c.prefix or f"{c.name}:"), ids)
             for c in protocol.criteria}
            for prompt in prompts
        ]  # fmt: skip
    return time.perf_counter() - started, out


def parity(a: dict, b: dict, n: int) -> dict:
    """Max |P(yes) difference| and how many (prompt, category) tags differ, over the first n prompts."""
    worst, differ = 0.0, 0
    for category, tags in a.items():
        for x, y in zip(tags[:n], b[category][:n]):
            px = x.p_yes if hasattr(x, "p_yes") else x
            py = y.p_yes if hasattr(y, "p_yes") else y
            worst = max(worst, *(abs(px[k] - py[k]) for k in px))
            if hasattr(x, "value") and hasattr(y, "value") and x.value != y.value:
                differ += 1
    return {"max_p_yes_diff": worst, "tags_differing": differ}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data = Path(os.environ.get("PODIUM_DATA_DIR", ROOT.parent / "shared" / "data"))
    models = Path(os.environ.get("PODIUM_MODELS_DIR", ROOT / "var" / "models"))
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--plain", type=int, default=16, help="prompts for the plain loop (the slow peer)")
    parser.add_argument("--model", default=str(models / "SmolLM2-135M-Instruct"))
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--kv-cache-gb", type=float, default=1.0, help="vLLM's KV cache on CPU")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "categories.json"))
    args = parser.parse_args()
    if (
        min(args.prompts, args.plain, args.threads) < 1
        or args.plain > args.prompts
        or not args.kv_cache_gb > 0
    ):
        parser.error(
            "--prompts, --plain (at most --prompts) and --threads must be at least 1, --kv-cache-gb positive"
        )

    import torch

    from evalcore.categories import bundled_category_protocols, load_category_protocol
    from evalcore.models import load_backend

    torch.set_num_threads(args.threads)
    protocols = [load_category_protocol(name) for name in bundled_category_protocols()]
    prompts = real_prompts(data, args.prompts)
    reads = sum(len(p.criteria) for p in protocols)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    hf = load_backend("hf", path=args.model, dtype="float32", device=args.device)
    hf_load = time.perf_counter() - started
    engine_args = (
        {"kv_cache_gb": args.kv_cache_gb} if args.device == "cpu" else {"gpu_memory_utilization": 0.4}
    )
    started = time.perf_counter()
    vllm = load_backend("vllm", path=args.model, device=args.device, **engine_args)
    vllm_load = time.perf_counter() - started
    tag_all(hf, protocols, prompts[:2])  # warm-up, both
    tag_all(vllm, protocols, prompts[:2])
    hf_s, hf_tags = tag_all(hf, protocols, prompts)
    vllm_s, vllm_tags = tag_all(vllm, protocols, prompts)
    plain_s, plain_p = plain_loop(hf, protocols, prompts[: args.plain])
    summary = {
        "model": Path(args.model).name, "device": args.device, "threads": args.threads, "prompts": len(prompts),
        "protocols": [p.name for p in protocols], "reads_per_prompt": reads,
        "load_s": {"hf": hf_load, "vllm": vllm_load}, "load_average_before": load_before,
        "seconds": {"hf": hf_s, "vllm": vllm_s, "plain": plain_s, "plain_prompts": args.plain},
        "prompts_per_s": {"hf": len(prompts) / hf_s, "vllm": len(prompts) / vllm_s, "plain": args.plain / plain_s},
        "parity": {"vllm_vs_hf": parity(vllm_tags, hf_tags, len(prompts)),
                   "hf_vs_plain": parity(hf_tags, plain_p, args.plain)},
        "in_category": {c: sum(bool(t.value) for t in tags) for c, tags in hf_tags.items()},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load_average_after": os.getloadavg()[0],
    }  # fmt: skip
    rate = summary["prompts_per_s"]
    print(f"{len(prompts)} real prompts x {len(protocols)} protocols ({reads} yes/no reads a prompt), "
          f"{args.threads} thread(s), load {load_before:.1f} -> {summary['load_average_after']:.1f}")  # fmt: skip
    print(f"  hf backend:   {rate['hf']:.2f} prompts/s ({hf_s:.1f} s)")
    print(
        f"  vllm backend: {rate['vllm']:.2f} prompts/s ({vllm_s:.1f} s)  = {rate['vllm'] / rate['hf']:.2f}x hf"
    )
    print(f"  plain loop:   {rate['plain']:.2f} prompts/s ({args.plain} prompts, {plain_s:.1f} s); "
          f"hf {rate['hf'] / rate['plain']:.2f}x, vllm {rate['vllm'] / rate['plain']:.2f}x")  # fmt: skip
    print(f"  parity: {summary['parity']}; tagged in: {summary['in_category']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    ok = all(
        p["max_p_yes_diff"] <= TOLERANCE and p["tags_differing"] == 0 for p in summary["parity"].values()
    )
    print("parity PASS" if ok else "parity FAIL")
    vllm.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
