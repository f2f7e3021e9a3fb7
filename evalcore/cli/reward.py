"""``python -m evalcore reward``: score a reward model on preference pairs.

    python -m evalcore reward --model hf --model-args path=DIR PAIRS [PAIRS ...] --out DIR
    python -m evalcore reward --model hf --model-args path=POLICY --ref-model-args path=REF [--beta 0.1] PAIRS --out DIR

PAIRS are the judge audit's pairs files (input, output_1, output_2, label 1|2), one category each:
``NAME=PATH``, or ``PATH`` named by its stem. Without ``--ref-model-args`` the model is a
sequence-classification reward model (hf only); with it, the model is a DPO policy scored by its implicit
reward against that reference (any backend with log-likelihoods: hf, vllm). Writes ``DIR/report.json``
(accuracy overall and per category with Wilson 95% intervals, the model, the protocol) and
``DIR/rewards.jsonl`` (one line per pair).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
from pathlib import Path

from evalcore.cli import CliError, check_option
from evalcore.engine.results import code_version
from evalcore.models import load_backend, parse_model_args
from evalcore.reward.classifier import SequenceClassifierReward
from evalcore.reward.pairs import MAX_FIELD_CHARS, read_reward_pairs
from evalcore.reward.scoring import classifier_rewards, dpo_rewards, reward_report

DEFAULT_BETA = 0.1
TIE_RULE = "a pair is correct when the chosen answer's reward is strictly higher; equal rewards are a tie, never correct"


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


def _template_sha256(model) -> str | None:
    """SHA-256 of the chat template that shapes the conversations (None without one)."""
    template = getattr(getattr(model, "tokenizer", None), "chat_template", None)
    return hashlib.sha256(template.encode()).hexdigest() if isinstance(template, str) else None


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def run_reward(args: argparse.Namespace) -> int:
    dpo, beta = _checked(args)
    pairs, files = read_reward_pairs(args.pairs, max_field_chars=args.max_field_chars)
    if args.limit is not None:  # the first N of each file (pair ids end with the index in the file)
        pairs = [p for p in pairs if int(p.pair_id.rsplit("/", 1)[1]) < args.limit]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_args = parse_model_args(args.model_args)
    protocol = {"tie_rule": TIE_RULE, "interval": "wilson", "level": 0.95, "limit": args.limit,
                "max_field_chars": args.max_field_chars, "code_version": code_version()}  # fmt: skip
    if dpo:
        policy = load_backend(args.model, **model_args)
        ref_name, ref_args = args.ref_model or args.model, parse_model_args(args.ref_model_args)
        same = ref_name == args.model and ref_args == model_args
        reference = policy if same else load_backend(ref_name, **ref_args)
        records = dpo_rewards(policy, reference, pairs, beta=beta)
        report = {
            "kind": "dpo",
            "model": policy.identity.as_dict(),
            "reference": reference.identity.as_dict(),
        }
        protocol.update(beta=beta, reward="beta * (log p_policy(answer|prompt) - log p_reference(answer|prompt))",
                        conversation="prompt as a user turn (chat template); the answer's tokens to the end of its turn")  # fmt: skip
    else:
        model = SequenceClassifierReward(**model_args)
        records = classifier_rewards(model, pairs)
        report = {"kind": "classifier", "model": model.identity.as_dict()}
        protocol.update(chat_template_sha256=_template_sha256(model))
        protocol.update(reward="the score head's output at the conversation's last token",
                        conversation="prompt as a user turn, answer as the assistant's, chat template (plain text without one)",
                        max_length=model.max_length)  # fmt: skip
    report["protocol"] = protocol
    report.update(reward_report(records, files))
    _write(
        out / "rewards.jsonl",
        "".join(json.dumps(r.as_dict(), ensure_ascii=False, sort_keys=True) + "\n" for r in records),
    )
    _write(out / "report.json", json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    _print_report(report)
    return 0


def _print_report(report: dict) -> None:
    print(f"{'category':<28} {'accuracy':>8} {'95% interval':>18} {'n':>5} {'ties':>5} {'skipped':>7}")
    for name, v in [("overall", report["overall"]), *report["categories"].items()]:
        value = "-" if v["value"] is None else f"{v['value']:.4f}"
        interval = "-" if v["value"] is None else f"[{v['ci_low']:.4f}, {v['ci_high']:.4f}]"
        print(f"{name[:28]:<28} {value:>8} {interval:>18} {v['n']:>5} {v['tie']:>5} {v['skipped']:>7}")
