"""Benchmark the arena refit's statistics at 200 models and 1M / 10M battles (no database).

    OMP_NUM_THREADS=1 .venv/bin/python bench/ratings_scale.py                       # 1M and 10M
    OMP_NUM_THREADS=1 .venv/bin/python bench/ratings_scale.py --sizes 1e6 --baseline f1cc826

Data (generated in numpy, seeded): 200 models with Elo-like strengths, pair frequencies drawn from a
log-normal (sigma 1.5) over all 19,900 pairs, so nearly every pair is observed and a few carry most of the
votes; 17% ties, 9% both-bad ties; per-answer style counts (tokens, headers, list items, bold) with a
length preference in the outcomes; vote timestamps.

Times are CPU seconds of this process (``time.process_time``; with ``OMP_NUM_THREADS=1`` everything runs
on one thread), so that a busy shared machine does not inflate them; wall times go to stderr. Each size
times what :mod:`arena.ratings.refit` runs for one category, called the same way: the pair
aggregation, the BT point fit, ``bootstrap_bradley_terry`` with 1,000 rounds (``fit_bt``), the
style-controlled fit with the rounds ``style_rounds`` allows under ``STYLE_BUDGET`` (``fit_style``; at
1M and more that is the sandwich fit), and online Elo without the permutation study (``fit_elo`` above
100k votes). ``--style-rounds R`` also times R style bootstrap rounds (the cost the budget avoids).

``--baseline REF`` runs the same measurements on the evalcore of git revision REF (exported with
``git archive`` into a temporary directory) in a child process right after, and prints both columns.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if os.environ.get("RATINGS_SCALE_EVALCORE"):
    sys.path.insert(0, os.environ["RATINGS_SCALE_EVALCORE"])
else:
    sys.path.insert(0, str(ROOT))

from evalcore.ratings import (  # noqa: E402
    Battles,
    aggregate,
    bootstrap_bradley_terry,
    fit_bradley_terry,
    fit_style_controlled,
    online_elo,
)

# As in arena/ratings/fits.py (not imported: it needs Django).
STYLE_BUDGET = 1_500_000
STYLE_MIN_ROUNDS = 100


def style_rounds(n: int, rounds: int, budget: int) -> int:
    if n * rounds <= budget:
        return rounds
    affordable = budget // max(n, 1)
    return affordable if affordable >= STYLE_MIN_ROUNDS else 0


def generate(n: int, *, n_models: int = 200, seed: int = 0) -> Battles:
    """``n`` Arena-like battles among ``n_models`` models with style counts (see the module docstring)."""
    rng = np.random.default_rng(seed)
    strength = np.sort(rng.normal(0.0, 0.75, n_models))[::-1]
    iu, ju = np.triu_indices(n_models, k=1)
    weights = rng.lognormal(0.0, 1.5, iu.size)
    pair = rng.choice(iu.size, size=n, p=weights / weights.sum())
    a, b = iu[pair], ju[pair]
    flip = rng.random(n) < 0.5
    a, b = np.where(flip, b, a).astype(np.int32), np.where(flip, a, b).astype(np.int32)
    tokens = rng.lognormal(5.5, 0.8, (n, 2)).astype(np.int64)
    style = np.empty((2, n, 4))
    style[:, :, 0] = tokens.T
    style[:, :, 1] = rng.poisson(1.0, (2, n))
    style[:, :, 2] = rng.poisson(3.0, (2, n))
    style[:, :, 3] = rng.poisson(2.0, (2, n))
    length = (style[0, :, 0] - style[1, :, 0]) / (style[0, :, 0] + style[1, :, 0] + 1.0)
    p_a = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b] + 0.4 * length)))
    outcome = np.where(rng.random(n) < p_a, 0, 1).astype(np.int8)
    tie = rng.random(n)
    outcome[tie < 0.26] = 2
    outcome[tie < 0.09] = 3
    models = tuple(f"model-{k:03d}" for k in range(n_models))
    tstamp = np.sort(rng.uniform(1.7e9, 1.75e9, n))
    return Battles(models, a, b, outcome, tstamp, style[0], style[1])


def measure(n: int, *, rounds: int, style_extra: int, seed: int) -> dict:
    """Seconds per step for one category of ``n`` battles, plus facts about the fits."""
    t: dict = {}
    battles = generate(n, seed=seed)

    def timed(label, fn):
        start, wall = time.process_time(), time.perf_counter()
        value = fn()
        t[label] = time.process_time() - start
        print(
            f"  {label:<40s} {t[label]:8.2f} s CPU ({time.perf_counter() - wall:.2f} s wall)",
            file=sys.stderr,
            flush=True,
        )
        return value

    counts = timed("aggregate", lambda: aggregate(battles))
    t["pairs"] = counts.n_pairs
    point = timed("bt point fit", lambda: fit_bradley_terry(counts))
    boot = timed(
        f"bt bootstrap {rounds}",
        lambda: bootstrap_bradley_terry(
            counts,
            rounds=rounds,
            rng=np.random.default_rng(seed),
            ties="half",
            level=0.95,
            keep_samples=False,
        ),
    )
    t["bt_max_diff_point"] = float(np.max(np.abs(boot.ratings - point.ratings)))
    t["bt_ci_width"] = float(np.median(boot.ci_high - boot.ci_low))
    used = style_rounds(n, rounds, STYLE_BUDGET)
    style = timed(
        f"style fit ({used} rounds)",
        lambda: fit_style_controlled(
            battles, ties="half", rounds=used, rng=np.random.default_rng(seed), level=0.95
        ),
    )
    t["style_iterations"] = style.ratings.iterations
    t["style_gradient"] = style.ratings.gradient_norm
    t["style_coef"] = [float(c) for c in style.coefficients]
    if style_extra:
        timed(
            f"style bootstrap {style_extra}",
            lambda: fit_style_controlled(
                battles, ties="half", rounds=style_extra, rng=np.random.default_rng(seed)
            ),
        )
    elo = timed("online elo", lambda: online_elo(battles, k=4.0, ties="half"))
    t["elo_first"] = float(elo.ratings[0])
    t["category total"] = sum(
        t[k]
        for k in (
            "aggregate",
            "bt point fit",
            f"bt bootstrap {rounds}",
            f"style fit ({used} rounds)",
            "online elo",
        )
    )
    return t


def run_baseline(ref: str, argv: list[str]) -> dict:
    """The same measurements on ``ref``'s evalcore, in a child process."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "archive", ref, "evalcore"], cwd=ROOT, check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        env = dict(os.environ, RATINGS_SCALE_EVALCORE=tmp)
        out = subprocess.run(
            [sys.executable, __file__, *argv, "--json"],
            env=env,
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
    return json.loads(out.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e6,1e7", help="comma-separated battle counts")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument(
        "--style-rounds", type=int, default=0, help="also time this many style bootstrap rounds"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", help="git revision to compare against in the same run")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    results = {}
    for n in sizes:
        print(f"{n:,} battles ({'baseline' if args.json else 'this tree'}):", file=sys.stderr, flush=True)
        results[str(n)] = measure(n, rounds=args.rounds, style_extra=args.style_rounds, seed=args.seed)
    if args.json:
        print(json.dumps(results))
        return 0
    base = None
    if args.baseline:
        child = ["--sizes", args.sizes, "--rounds", str(args.rounds), "--style-rounds", str(args.style_rounds),
                 "--seed", str(args.seed)]  # fmt: skip
        base = run_baseline(args.baseline, child)
    print(f"\nOMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, 200 models")
    for n in sizes:
        ours = results[str(n)]
        print(f"\n{n:,} battles, {ours['pairs']:,} pairs")
        print(
            f"  {'step':<34s} {'this tree':>10s}" + (f" {args.baseline:>10s} {'ratio':>7s}" if base else "")
        )
        for key, value in ours.items():
            if not key.startswith(("aggregate", "bt ", "style ", "online", "category")):
                continue
            line = f"  {key:<34s} {value:9.2f}s"
            if base and key in base[str(n)]:
                old = base[str(n)][key]
                line += f" {old:9.2f}s {old / max(value, 1e-9):6.1f}x"
            print(line)
        facts = {k: v for k, v in ours.items() if k.startswith(("style_", "elo_", "bt_max", "bt_ci"))}
        print(f"  facts: {facts}")
        if base:
            old = base[str(n)]
            print(f"  baseline facts: { {k: v for k, v in old.items() if k in facts} }")
    return 0


if __name__ == "__main__":
    sys.exit(main())
