"""``python -m evalcore reward``: score a reward model on preference pairs.

    python -m evalcore reward --model hf --model-args path=DIR PAIRS [PAIRS ...] --out DIR
    python -m evalcore reward --model hf --model-args path=POLICY --ref-model-args path=REF [--beta 0.1] PAIRS --out DIR

PAIRS are the judge audit's pairs files (input, output_1, output_2, label 1|2), one category each:
``NAME=PATH``, or ``PATH`` named by its stem. Without ``--ref-model-args`` the model is a
sequence-classification reward model (hf only); with it, the model is a DPO policy scored by its implicit
reward against that reference (any backend with log-likelihoods: hf, vllm). Writes ``DIR/report.json``
(accuracy overall and per category with mid-p 95% intervals, the model, the protocol) and
``DIR/rewards.jsonl`` (one line per pair).
"""

from __future__ import annotations

import argparse
import math

from evalcore.cli import CliError, check_option
from evalcore.models import parse_model_args
from evalcore.reward.pairs import MAX_FIELD_CHARS
from evalcore.reward.run import DEFAULT_BETA, reward_files_write, reward_run


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "reward", help="score a reward model (or a DPO policy) on preference pairs"
    )
    parser.add_argument(
        "pairs", nargs="+", metavar="PAIRS", help="[NAME=]FILE: JSON/JSONL pairs, one category per file"
    )
    parser.add_argument(
        "--model", required=True, help="backend: hf (a classifier or a DPO policy), vllm (DPO policy)"
    )
    parser.add_argument(
        "--model-args", default="", help="comma-separated key=value, e.g. path=DIR,dtype=float32"
    )
    parser.add_argument(
        "--ref-model-args", default=None, help="the DPO reference's key=value; makes --model a DPO policy"
    )
    parser.add_argument("--ref-model", default=None, help="the reference's backend (default: --model)")
    parser.add_argument("--beta", type=float, default=None, help=f"DPO's beta (default {DEFAULT_BETA})")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N pairs of each file")
    parser.add_argument(
        "--max-field-chars", type=int, default=MAX_FIELD_CHARS, help="longest text allowed in a pair"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.set_defaults(func=run_reward)


def _checked(args: argparse.Namespace) -> tuple[bool, float]:
    check_option(args.limit, "--limit")
    check_option(args.max_field_chars, "--max-field-chars")
    dpo = args.ref_model_args is not None
    if not dpo and (args.beta is not None or args.ref_model is not None):
        raise CliError("--beta and --ref-model need --ref-model-args (a DPO policy's reference)")
    beta = DEFAULT_BETA if args.beta is None else args.beta
    if not (math.isfinite(beta) and beta > 0):
        raise CliError(f"--beta must be a positive number, got {beta}")
    if not dpo and args.model != "hf":
        raise CliError(f"a sequence-classification reward model runs on --model hf, not {args.model!r} "
                       "(a DPO policy on another backend needs --ref-model-args)")  # fmt: skip
    try:
        parse_model_args(args.model_args)
        if dpo:
            parse_model_args(args.ref_model_args)
    except ValueError as exc:
        raise CliError(f"--model-args / --ref-model-args: {exc}") from None
    return dpo, beta


def run_reward(args: argparse.Namespace) -> int:
    dpo, beta = _checked(args)
    report, records = reward_run(
        args.pairs, model=args.model, model_args=parse_model_args(args.model_args),
        ref_model=args.ref_model, ref_model_args=parse_model_args(args.ref_model_args) if dpo else None,
        beta=beta, limit=args.limit, max_field_chars=args.max_field_chars,
    )  # fmt: skip
    reward_files_write(args.out, report, records)
    _print_report(report)
    return 0


def _print_report(report: dict) -> None:
    print(f"{'category':<28} {'accuracy':>8} {'95% interval':>18} {'n':>5} {'ties':>5} {'skipped':>7}")
    rows = [("overall", report["overall"])]
    for category, figure in report["categories"].items():
        rows.append((category, figure))
        rows += [(f"  {subset}", v) for subset, v in report["subsets"].get(category, {}).items()]
    for name, v in rows:
        value = "-" if v["value"] is None else f"{v['value']:.4f}"
        interval = "-" if v["value"] is None else f"[{v['ci_low']:.4f}, {v['ci_high']:.4f}]"
        print(f"{name[:28]:<28} {value:>8} {interval:>18} {v['n']:>5} {v['tie']:>5} {v['skipped']:>7}")
