"""``python -m evalcore lc ANNOTATIONS --baseline NAME``: raw, discrete and length-controlled win rates.

Reads a CSV with ``model, instruction_id, len_output_1, len_output_2, preference`` (``output_1`` is the
baseline's answer; preference in [1, 2], 2 = the model's answer preferred, 0 = a draw) and prints
``model, win_rate, win_rate_ci_low, win_rate_ci_high, discrete_win_rate, discrete_ci_low, discrete_ci_high,
lc_win_rate, lc_ci_low, lc_ci_high, lc_standard_error, n`` (percent), best LC first. The raw and discrete
win rates' 95% intervals are mid-p at the effective size; the LC one is mid-p at the effective size its
delta-method error implies (``delta-mid-p``); ``lc_standard_error`` is that interval's own, empty where it is
lopsided (near 0 or 100), so it never disagrees with the interval beside it.
"""

from __future__ import annotations

import argparse
import json
import sys

from evalcore.boundary import csvsafe
from evalcore.ratings.lc import LC_INTERVAL, length_controlled_win_rate
from evalcore.ratings.lc_annotations import read_difficulty, read_lc_annotations

LC_OUTPUT_COLUMNS = ("model", "win_rate", "win_rate_ci_low", "win_rate_ci_high", "discrete_win_rate", "discrete_ci_low",
                     "discrete_ci_high", "lc_win_rate", "lc_ci_low", "lc_ci_high", "lc_standard_error", "n")  # fmt: skip


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "lc",
        help="length-controlled win rates against a baseline (AlpacaEval 2.0)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("annotations", metavar="ANNOTATIONS", help="CSV of judge annotations against the baseline")
    p.add_argument("--baseline", required=True, help="the baseline model (the output_1 generator)")
    p.add_argument(
        "--difficulty",
        metavar="FILE",
        help="per-instruction difficulty CSV (instruction_id, difficulty); default: estimated from the models",
    )
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ann = read_lc_annotations(args.annotations)
    difficulty = read_difficulty(args.difficulty) if args.difficulty else None
    result = length_controlled_win_rate(ann, baseline=args.baseline, difficulty=difficulty)
    rows = result.to_rows()
    print(f"note: instruction difficulty {result.difficulty_source}", file=sys.stderr)
    out = open(args.out, "w", encoding="utf-8", newline="") if args.out else sys.stdout
    try:
        if args.format == "json":
            doc = {"baseline": result.baseline, "difficulty": result.difficulty_source, "level": 0.95,
                   "intervals": {"win_rate": "mid-p-effective", "discrete_win_rate": "mid-p-effective",
                                 "lc_win_rate": LC_INTERVAL}, "models": rows}  # fmt: skip
            json.dump(doc, out, indent=2)
            out.write("\n")
        else:
            writer = csvsafe.writer(out, lineterminator="\n")
            writer.writerow(LC_OUTPUT_COLUMNS)
            for row in rows:
                writer.writerow(
                    [row["model"]] + ["" if row[c] is None else f"{row[c]:.4f}" for c in LC_OUTPUT_COLUMNS[1:-1]] + [row["n"]]
                )
    finally:
        if args.out:
            out.close()
    return 0
