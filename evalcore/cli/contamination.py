"""``python -m evalcore contamination``: n-gram scan, memorisation probe, exchangeability test.

    python -m evalcore contamination scan --tasks gsm8k --corpus PATH [--n 13] --out DIR
    python -m evalcore contamination probe --model hf --model-args path=DIR --tasks gsm8k --limit 200 --out DIR
    python -m evalcore contamination exchangeability --model hf --model-args path=DIR --tasks gsm8k \\
        [--shard-size 16] [--permutations 39] --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from evalcore.cli import CliError, check_option, task_names
from evalcore.contamination.corpus import MAX_LINE_BYTES
from evalcore.contamination.exchangeability import exchangeability_test, shard_documents
from evalcore.contamination.items import resolve_tasks
from evalcore.contamination.probe import memorisation_probe
from evalcore.contamination.scan import scan_corpus, write_scan
from evalcore.models import load_backend, parse_model_args

PROBE_GEN_TOKENS = 32  # tokens the probe decodes per item; --words cannot ask for more words than that


def register(subparsers) -> None:
    parser = subparsers.add_parser("contamination", help="contamination checks: n-gram scan, memorisation probe, exchangeability")
    commands = parser.add_subparsers(dest="contamination_command", metavar="CHECK")
    scan = commands.add_parser("scan", help="find benchmark items in a training corpus (n-gram overlap)")
    _task_args(scan)
    scan.add_argument("--corpus", required=True, action="append", metavar="PATH",
                      help=".txt / .jsonl (text field) files, optionally .gz, or a folder of them; repeatable")  # fmt: skip
    scan.add_argument("--n", type=int, default=13, help="n-gram length in words, 8 to 13 (default 13)")
    scan.add_argument("--min-matches", type=int, default=1, help="n-gram hits that flag an item (default 1)")
    scan.add_argument("--max-line-bytes", type=int, default=MAX_LINE_BYTES, help="longer lines are skipped and counted")
    scan.set_defaults(func=run_scan)
    probe = commands.add_parser("probe", help="memorisation probe: greedy completion of items, test vs train split")
    _task_args(probe)
    _model_args(probe)
    probe.add_argument("--limit", type=int, default=200, help="items per split (default 200)")
    probe.add_argument("--words", type=int, default=8, help="words that must match (default 8)")
    probe.set_defaults(func=run_probe)
    exch = commands.add_parser("exchangeability", help="published order vs shuffled orders (Oren et al., 2024)")
    _task_args(exch)
    _model_args(exch)
    exch.add_argument("--shard-size", type=int, default=16, help="documents in the shard (default 16)")
    exch.add_argument("--permutations", type=int, default=39, help="random orders K (default 39)")
    exch.add_argument("--seed", type=int, default=0)
    exch.set_defaults(func=run_exchangeability)
    parser.set_defaults(func=lambda args: _missing_check(parser))


def _task_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", required=True, help="comma-separated task, group or tag names")
    parser.add_argument("--include-path", action="append", default=[], metavar="DIR", help="folder of extra task YAML files")
    parser.add_argument("--out", required=True, metavar="DIR", help="write the results here")


def _model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="backend name: hf, vllm or openai")
    parser.add_argument("--model-args", default="", help="comma-separated key=value, e.g. path=DIR,dtype=float32")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress counter")


def _missing_check(parser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _task_names(args) -> list[str]:
    return task_names(args.tasks)


def _progress(label: str, enabled: bool):
    """A tqdm counter on stderr for a backend's ``progress`` callback (None when turned off)."""
    if not enabled:
        return None, lambda: None
    bar = tqdm(desc=label, unit="step", leave=True)
    return bar.update, bar.close


def run_scan(args) -> int:
    check_option(args.min_matches, "--min-matches")
    check_option(args.max_line_bytes, "--max-line-bytes")
    result = scan_corpus(_task_names(args), args.corpus, n=args.n, min_matches=args.min_matches,
                         include_paths=args.include_path, max_line_bytes=args.max_line_bytes)  # fmt: skip
    out = write_scan(result, args.out)
    for name, summary in result.tasks.items():
        print(f"{name}\titems {summary.items}\tflagged {summary.flagged}\tshare {summary.share:.4f}")
    skipped = result.corpus["lines_skipped"]
    print(f"corpus: {result.corpus['files']} files, {result.corpus['bytes']:,} bytes, {skipped} lines skipped; "
          f"results in {out}", file=sys.stderr)  # fmt: skip
    return 0


def _write_json(out_dir: str, name: str, payload: dict) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return path


def _backend(args):
    return load_backend(args.model, **parse_model_args(args.model_args))


def run_probe(args) -> int:
    check_option(args.limit, "--limit")
    check_option(args.words, "--words")
    if args.words > PROBE_GEN_TOKENS:
        raise CliError(f"--words must be at most {PROBE_GEN_TOKENS} (the probe decodes {PROBE_GEN_TOKENS} tokens), got {args.words}")
    names = _task_names(args)
    resolve_tasks(names, include_paths=args.include_path)  # an unknown task fails here, before the model loads
    backend = _backend(args)
    update, close = _progress("probe", not args.no_progress)
    try:
        results = memorisation_probe(backend, names, limit=args.limit, words=args.words,
                                     max_gen_toks=PROBE_GEN_TOKENS, include_paths=args.include_path, progress=update)  # fmt: skip
    finally:
        close()
    payload = {"model": backend.identity.as_dict(), "limit": args.limit, "tasks": {t: r.summary() for t, r in results.items()}}
    path = _write_json(args.out, "probe.json", payload)
    with open(Path(args.out) / "probe_samples.jsonl", "w", encoding="utf-8") as handle:
        for result in results.values():
            for record in result.records:
                handle.write(json.dumps(record.__dict__) + "\n")
    for task, r in results.items():
        print(f"{task}\ttest {r.test.hits}/{r.test.n} = {r.test.rate:.3f} [{r.test.ci_low:.3f}, {r.test.ci_high:.3f}]"
              f"\ttrain {r.train.hits}/{r.train.n} = {r.train.rate:.3f} [{r.train.ci_low:.3f}, {r.train.ci_high:.3f}]"
              f"\tdifference {r.difference:+.3f} [{r.diff_ci_low:+.3f}, {r.diff_ci_high:+.3f}]")  # fmt: skip
    print(f"results written to {path}", file=sys.stderr)
    return 0


def run_exchangeability(args) -> int:
    check_option(args.shard_size, "--shard-size", minimum=2)
    check_option(args.permutations, "--permutations")
    check_option(args.seed, "--seed", minimum=0)
    names = _task_names(args)
    if len(names) != 1:
        raise CliError("--tasks must name one task for the exchangeability test")
    documents = shard_documents(names[0], shard_size=args.shard_size, include_paths=args.include_path)
    backend = _backend(args)
    update, close = _progress(f"exchangeability ({args.permutations + 1} orders)", not args.no_progress)
    try:
        result = exchangeability_test(backend, documents, permutations=args.permutations,
                                      rng=np.random.default_rng(args.seed), progress=update)  # fmt: skip
    finally:
        close()
    payload = {"model": backend.identity.as_dict(), "task": names[0], "seed": args.seed, **result.summary(),
               "permuted_logprobs": list(result.permuted_logprobs)}  # fmt: skip
    path = _write_json(args.out, "exchangeability.json", payload)
    print(f"{names[0]}\tcanonical {result.canonical_logprob:.2f}\tpermuted mean {np.mean(result.permuted_logprobs):.2f}"
          f"\tp = {result.p_value:.4f} (K = {len(result.permuted_logprobs)})")  # fmt: skip
    print(f"results written to {path}", file=sys.stderr)
    return 0
