"""``python -m evalcore rate VOTES``: ratings from a vote file, one row per model, best first.

Columns: ``model, rating, ci_low, ci_high, rank, rank_ub, battles, provisional``. A model is provisional
with fewer than ``--provisional-votes`` battles (default 300) or a record of all wins or all losses: its
interval holds the exact binomial bounds of its record (``inf`` on an open side), it takes no rank 1 and
does not count in other models' ranks (see ``docs/ratings.md``). ``--method style`` adds a second
table (after a blank line in CSV, under ``coefficients`` in JSON) with each style coefficient and its
interval. Notes on the scale (anchor, prior, dropped bootstrap rounds) go to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

from evalcore.boundary import csvsafe
from evalcore.cli import check_option
from evalcore.ratings import (
    TIES_POLICIES,
    aggregate,
    bootstrap_bradley_terry,
    fit_bradley_terry,
    online_elo,
    read_battles,
    read_pair_counts,
)
from evalcore.ratings.io import is_pair_counts_file
from evalcore.ratings.provisional import DEFAULT_MIN_BATTLES, mark_provisional
from evalcore.ratings.result import parse_anchor
from evalcore.ratings.style import fit_style_controlled

DEFAULT_ROUNDS = {"bt": 1000, "style": 100, "elo": 0}
RATING_COLUMNS = ("model", "rating", "ci_low", "ci_high", "rank", "rank_ub", "battles", "provisional")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "rate",
        help="rate models from pairwise votes (Bradley-Terry, Elo, style control)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("votes", metavar="VOTES", help="battles (CSV, JSON, JSONL, Parquet) or a pair-count CSV")
    p.add_argument("--method", choices=("bt", "elo", "style"), default="bt")
    p.add_argument("--ties", choices=TIES_POLICIES, default="half", help="ties policy (default: half)")
    p.add_argument("--anchor", metavar="MODEL=RATING", help="fix one model's rating (default: mean 1000)")
    p.add_argument(
        "--prior", type=float, default=None, help="L2 prior (logit scale) when the MLE is not finite"
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=None,
        metavar="N",
        help="bootstrap rounds (bt: default 1000, 0 gives sandwich intervals; style: default 100); "
        "for elo: random vote orders for the order-spread interval (default 0)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--level", type=float, default=0.95, help="interval coverage (default 0.95)")
    p.add_argument("--k", type=float, default=4.0, help="Elo K factor (default 4)")
    p.add_argument(
        "--provisional-votes",
        type=int,
        default=DEFAULT_MIN_BATTLES,
        metavar="N",
        help=f"models with fewer battles than N are provisional (default {DEFAULT_MIN_BATTLES}; 0: only "
        "records of all wins or all losses)",
    )
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=run)


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, label: str):
        self.label = label
        self.enabled = sys.stderr.isatty()
        self.start = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        elapsed = time.monotonic() - self.start
        sys.stderr.write(
            f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:.1f}s"
        )
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _fmt(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e-3 and value != 0 else f"{value:.4f}"
    return str(value)


def run(args: argparse.Namespace) -> int:
    if args.bootstrap is None:
        args.bootstrap = DEFAULT_ROUNDS[args.method]
    if args.bootstrap < 0:
        raise ValueError("--bootstrap must be zero or positive")
    check_option(args.seed, "--seed", minimum=0)
    if not 0 < args.level < 1:
        raise ValueError("--level must be between 0 and 1")
    if not (math.isfinite(args.k) and args.k > 0):
        raise ValueError(f"--k must be a positive number, not {args.k}")
    if args.prior is not None and not (math.isfinite(args.prior) and args.prior >= 0):
        raise ValueError(f"--prior must be a non-negative number, not {args.prior}")
    parse_anchor(args.anchor)  # a malformed or non-finite anchor stops here, before any fit
    if args.provisional_votes < 0:
        raise ValueError("--provisional-votes must be zero or positive")
    counts_file = is_pair_counts_file(args.votes)
    if counts_file and args.method != "bt":
        raise ValueError(f"--method {args.method} needs individual battles; {args.votes} holds pair counts")
    battles = None if counts_file else read_battles(args.votes)
    counts = read_pair_counts(args.votes) if counts_file else aggregate(battles)
    result, coefficients = _fit(args, battles, counts, np.random.default_rng(args.seed))
    result = mark_provisional(result, counts, min_battles=args.provisional_votes)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    _write(result.to_rows(), coefficients, result, args)
    return 0


def _fit(args, battles, counts, rng):
    """The chosen method's result, and the style coefficient rows (None for other methods)."""
    if args.method == "bt":
        if args.bootstrap > 0:
            result = bootstrap_bradley_terry(
                counts,
                rounds=args.bootstrap,
                rng=rng,
                ties=args.ties,
                anchor=args.anchor,
                prior=args.prior,
                level=args.level,
                progress=_Progress("bootstrap"),
                keep_samples=False,
            )
        else:
            result = fit_bradley_terry(
                counts, ties=args.ties, anchor=args.anchor, prior=args.prior, level=args.level
            )
        return result, None
    if args.method == "elo":
        if args.anchor or args.prior:
            raise ValueError("--anchor and --prior apply to bt and style, not to online Elo")
        result = online_elo(
            battles, k=args.k, ties=args.ties, permutations=args.bootstrap, rng=rng, level=args.level
        )
        return result, None
    style = fit_style_controlled(
        battles,
        ties=args.ties,
        anchor=args.anchor,
        prior=args.prior,
        rounds=args.bootstrap,
        rng=rng,
        level=args.level,
        progress=_Progress("style bootstrap"),
    )
    return style.ratings, style.coefficient_rows()


def _finite_or_none(row: dict) -> dict:
    """JSON has no infinity: an open interval side is written as null."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


def _write(rows, coefficients, result, args) -> None:
    out = open(args.out, "w", encoding="utf-8", newline="") if args.out else sys.stdout
    try:
        if args.format == "json":
            doc = {
                "method": result.method,
                "ties": result.ties,
                "anchor": list(result.anchor) if result.anchor else None,
                "prior": result.prior,
                "interval": result.interval,
                "level": result.level,
                "bootstrap_rounds": result.bootstrap_rounds,
                "notes": list(result.notes),
                "provisional_votes": result.provisional_min_battles,
                "ratings": [_finite_or_none(row) for row in rows],
            }
            if coefficients is not None:
                doc["coefficients"] = coefficients
            json.dump(doc, out, indent=2, allow_nan=False)
            out.write("\n")
            return
        writer = csvsafe.writer(out, lineterminator="\n")
        writer.writerow(RATING_COLUMNS)
        for row in rows:
            writer.writerow([_fmt(row[c]) for c in RATING_COLUMNS])
        if coefficients:
            out.write("\n")
            cols = list(coefficients[0])
            writer.writerow(cols)
            for row in coefficients:
                writer.writerow([_fmt(row[c]) for c in cols])
    finally:
        if args.out:
            out.close()
