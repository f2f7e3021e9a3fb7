"""``python -m evalcore lc ANNOTATIONS --baseline NAME``: raw, discrete and length-controlled win rates.

Reads a CSV with ``model, instruction_id, len_output_1, len_output_2, preference`` (``output_1`` is the
baseline's answer; preference in [1, 2], 2 = the model's answer preferred, 0 = a draw) and prints
``model, win_rate, discrete_win_rate, lc_win_rate, lc_standard_error, n`` (percent), best LC first.
"""

from __future__ import annotations

import argparse
import json
import sys

from evalcore import csvsafe
from evalcore.ratings.lc import length_controlled_win_rate
from evalcore.ratings.lc_annotations import read_difficulty, read_lc_annotations

LC_OUTPUT_COLUMNS = ("model", "win_rate", "discrete_win_rate", "lc_win_rate", "lc_standard_error", "n")


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
            doc = {"baseline": result.baseline, "difficulty": result.difficulty_source, "models": rows}
            json.dump(doc, out, indent=2)
            out.write("\n")
        else:
            writer = csvsafe.writer(out, lineterminator="\n")
            writer.writerow(LC_OUTPUT_COLUMNS)
            for row in rows:
                writer.writerow(
                    [row["model"]] + [f"{row[c]:.4f}" for c in LC_OUTPUT_COLUMNS[1:5]] + [row["n"]]
                )
    finally:
        if args.out:
            out.close()
    return 0
