"""Coverage of a judge's mean grade interval (``evalcore.judging.scores.grade_summary``) at the sizes judges
are run at: the bundled sample's 8 questions, a category's 10 of MT-Bench's 80, MT-Bench's 80, and the 2-4
questions of a small custom set.

    OMP_NUM_THREADS=1 .venv/bin/python bench/grade_intervals.py            # about a minute on one core
    OMP_NUM_THREADS=1 .venv/bin/python bench/grade_intervals.py --quick    # smoke run (seconds)

Each simulated data set draws k questions of two turns, each turn a 1-10 grade from one of three grade
distributions (spread over the scale; top-heavy, as strong models get; narrow around 6, as a timid judge
gives), with a per-question effect shared by its two turns (half the questions easier by one point), and
asks whether the nominal 95% interval holds the distribution's true mean. Printed per k: the coverage
(Monte Carlo standard error ``sqrt(c (1 - c) / R)``) and mean width of

- **t-clustered** (Podium's: ``grade_summary(..., bounds=(1, 10))``, Student's t with the questions as
  clusters, clipped to the scale);
- the **percentile bootstrap** over questions it replaced (the peer: 1,000 rounds, a question's turns
  resampled together).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalcore.judging.scores import grade_summary  # noqa: E402

GRADES = np.arange(1, 11)
DISTRIBUTIONS = {
    "spread": np.array([0.02, 0.03, 0.05, 0.07, 0.10, 0.13, 0.17, 0.20, 0.15, 0.08]),
    "top-heavy": np.array([0, 0, 0, 0, 0, 0.02, 0.08, 0.20, 0.40, 0.30]),
    "narrow": np.array([0, 0, 0, 0.05, 0.25, 0.40, 0.25, 0.05, 0, 0]),
}
SIZES = (2, 3, 4, 8, 10, 16, 80)


def draw(rng, probs: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """(k x 2 grades, true mean): turns drawn from ``probs``; half the questions one point easier (capped)."""
    easier = rng.random(k) < 0.5
    grades = rng.choice(GRADES, size=(k, 2), p=probs) + easier[:, None]
    grades = np.minimum(grades, 10)
    shifted = np.minimum(GRADES + 1, 10)
    truth = 0.5 * float((probs * GRADES).sum()) + 0.5 * float((probs * shifted).sum())
    return grades.astype(float), truth


def percentile_bootstrap(grades: np.ndarray, rng, rounds: int = 1000) -> tuple[float, float]:
    k = grades.shape[0]
    sums = grades.sum(axis=1)
    weights = rng.multinomial(k, np.full(k, 1 / k), size=rounds).astype(float)
    means = (weights @ sums) / (weights.sum(axis=1) * 2)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="simulated data sets per cell")
    parser.add_argument("--quick", action="store_true", help="100 data sets per cell")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.reps < 1 or args.seed < 0:
        parser.error(f"--reps must be at least 1 and --seed at least 0, not {args.reps} and {args.seed}")
    reps = 100 if args.quick else args.reps
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"{'grades':<10} {'k':>3}  {'t-clustered: coverage (se), width':>36}  {'percentile bootstrap (peer)':>36}")
    for name, probs in DISTRIBUTIONS.items():
        for k in SIZES:
            hits = {"t": 0, "boot": 0}
            widths = {"t": [], "boot": []}
            for _ in range(reps):
                grades, truth = draw(rng, probs, k)
                scores = {f"q{i}/t{t + 1}": grades[i, t] for i in range(k) for t in range(2)}
                ours = grade_summary({"m": scores}, bounds=(1, 10))["m"]
                low, high = ours["ci_low"], ours["ci_high"]
                hits["t"] += low <= truth <= high
                widths["t"].append(high - low)
                low, high = percentile_bootstrap(grades, rng)
                hits["boot"] += low <= truth <= high
                widths["boot"].append(high - low)
            cells = []
            for key in ("t", "boot"):
                c = hits[key] / reps
                cells.append(f"{c:.3f} ({(c * (1 - c) / reps) ** 0.5:.3f}), {np.mean(widths[key]):.2f}")
            print(f"{name:<10} {k:>3}  {cells[0]:>36}  {cells[1]:>36}")
    print(f"{reps} data sets per cell, {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
