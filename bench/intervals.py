"""Coverage of every interval Podium reports, at the sizes the site shows (issue 49).

    OMP_NUM_THREADS=1 .venv/bin/python bench/intervals.py                 # the full run (about 2 minutes on one core)
    OMP_NUM_THREADS=1 .venv/bin/python bench/intervals.py --quick         # smoke run (about 20 seconds)
    .venv/bin/python bench/intervals.py [--rounds 10000] [--ratio-rounds 1000] [--configs 3] [--random-cases 24] [--seed 0]

For each kind of number (``evalcore.stats.estimates``) it prints how often the nominal 95% interval
holds the true value, with the Monte Carlo standard error ``sqrt(c (1 - c) / R)`` of R simulated data
sets, beside the peers the site could have used instead:

- **proportion** (``proportion``, mid-p): the coverage is exact, the binomial pmf summed over the counts
  whose interval holds p (no Monte Carlo error), for n in 4 ... 10,000 and p in 0.01 ... 0.99; beside it
  Wilson's interval (``evalcore.stats.mean_interval(method="wilson")``) and the plug-in normal interval
  of the lm-eval harness (``p +- 1.96 * stderr``, its ``mean_stderr`` being ``sqrt(p (1 - p) / (n - 1))``).
  Pointwise coverage of any interval that is a function of the count oscillates with p at small n
  (binomial discreteness): at n=10, p=0.01 the counts 0 and 0..1 have probabilities 0.904 and 0.996, and
  no interval whose bounds increase with the count can cover p with any probability in between. Such
  cells are marked ``*`` ("discrete": no run of consecutive counts has probability inside [0.93, 0.975])
  and counted apart in the summary; the per-n table also prints the coverage averaged over a
  neighbourhood of each p (logit(p) +- 0.25), which smooths the oscillation away.
- **bounded mean** (``bounded_mean``, mid-p at n / deff, the variance ratio held in [0.75, 1] under 10
  values and [0.5, 1] from 10) of non-binary values: a judge's verdicts
  (0, 0.5, 1 with a tie share), pass@5 by the unbiased estimator from 10 samples of problems whose
  success rates are Beta-distributed, and an F1-like mixture of 0s, 1s and uniforms; against Student's t
  (``t_mean`` clipped to [0, 1]).
- **clustered proportion** (``bounded_mean`` with ``clusters``: the design effect, and with G clusters the
  effective size further divided by (t_{G-1} / z)^2): passages of 4 questions whose success rates share a
  Beta random effect (intra-cluster correlation 0.1 or 0.3), against the mid-p interval that ignores the
  clusters.
- **group averages** of subtasks: the micro average (``pooled`` with weights n) and the macro average
  (``macro``, what ``group_value(weight_by_size=False)`` uses: the pooled mid-p interval, or where the
  parts' sizes differ more than tenfold the hull of it and MOVER), beside the macro average's pooled
  interval alone (peer): 2 to 60 subtasks, sizes (4-4, 4-20, 10-100, 100-1000, and log-uniform 4-1000)
  and true proportions drawn per configuration (``--configs`` per cell, each its own cell in the
  summary), then chosen groups whose parts differ in size by up to 250 times, a small part far from the
  others' proportions (where a macro average's variance is mostly the small part's, and the pooled size,
  which gives every part the average's variance, is too large).
- **MOVER** (``mover``): the board's average of 2 to 6 benchmarks of 4 to 10,000 items (chosen cases,
  among them a tiny benchmark with a high score beside a large one with a low score, and random ones),
  on the raw scale and normalised (each part through ``mapped`` with baseline 0.25 or 0, the average
  clipped to the normalised range; the truth is the normalised true mean).
- **ratio** (``evalcore.engine.metrics.ratio_value``: the delta-method t interval of
  ``estimates.ratio_of_sums``, "delta-t"): perplexity over documents of log-normal lengths (sd 0.8 or
  1.5 on the log scale: the second has a few documents dominate the sums) with a per-document
  difficulty, n 4 to 1,000; beside it the seeded percentile bootstrap ``ratio_value`` used before (and
  still uses where a document has no units), on the first ``--ratio-rounds`` of the same data sets at
  n <= 100 (it is slow).

The Monte Carlo kinds decide "covered" by inverting the mid-p test at the true value (the interval is
that inversion, so this equals comparing with its bisected bounds, at 4 incomplete-beta calls a data set
instead of 224), on vectorised copies of the module's arithmetic (the ratio kinds compare with their
bounds). Every cell also runs the module's own functions (``bounded_mean``, ``t_mean``, ``pooled``,
``macro``, ``mover``, ``mapped``, ``ratio_value``, and for the bootstrap peer ``ratio_statistic`` and
``bootstrap_value``) on its first data sets and the two must agree on every one (exit code 1 otherwise).

A table then gives, per kind and band of n, the cells' least, mean and largest coverage; the summary
gives, per kind, the least and largest coverage over cells with n >= 10, the least over
all cells, and lists cells outside [0.93, 0.975] at n >= 10 and below 0.90 anywhere (the targets of
issue 49); "(MC)" marks a cell within two Monte Carlo errors of the band. Results are recorded in
docs/ratings.md, "Interval coverage".
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path

import numpy as np
from scipy.special import betainc, betaln, logit, ndtri, stdtrit
from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalcore.engine.metrics import BOOTSTRAP_ROUNDS, bootstrap_value, ratio_statistic, ratio_value  # noqa: E402
from evalcore.stats import mean_interval, pass_at_k  # noqa: E402
from evalcore.stats.estimates import (  # noqa: E402
    DEFF_FLOOR,
    DEFF_FLOOR_SMALL,
    LEVEL,
    SMALL_N,
    SPREAD_RATIO,
    bounded_mean,
    macro,
    mapped,
    midp_bounds,
    mover,
    pooled,
    proportion,
    t_mean,
)

BAND = (0.93, 0.975)
FLOOR = 0.90
MIN_N = 10
TAIL = (1 - LEVEL) / 2
Z = float(ndtri(1 - TAIL))
PROPORTION_N = (4, 5, 8, 10, 20, 30, 50, 100, 114, 200, 500, 1000, 10000)
PROPORTION_P = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99)
MEAN_N = (4, 10, 30, 100, 1000)
CLUSTER_N = (4, 12, 40, 100, 400, 1000)
CLUSTER_SIZE = 4
RATIO_N = (4, 10, 30, 100, 1000)
BOOT_N = (4, 10, 30, 100)  # the bootstrap peer's sizes (its cost grows as n)
RATIO_SIGMA = (0.8, 1.5)  # log-normal sd of the documents' lengths
CHECKED = 6  # data sets per cell also run through the module's own functions (2 with --quick)


@dataclass
class Cell:
    kind: str
    label: str
    n: int
    coverage: float
    rounds: int | None  # None: exact
    discrete: bool = False

    @property
    def se(self) -> float:
        return 0.0 if self.rounds is None else math.sqrt(self.coverage * (1 - self.coverage) / self.rounds)


@dataclass
class Results:
    cells: list[Cell] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    checked: int = CHECKED

    def add(self, kind: str, label: str, n: int, coverage: float, rounds: int | None, discrete: bool = False):
        if kind not in self.kinds:
            self.kinds.append(kind)
        self.cells.append(Cell(kind, label, int(n), float(coverage), rounds, discrete))
        return coverage

    def agree(self, kind: str, label: str, ours: np.ndarray, theirs: list[bool]) -> None:
        """The vectorised copy's verdicts on the first data sets equal the module's."""
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if bool(a) != bool(b):
                self.mismatches.append(f"{kind} {label} data set {i}: copy says {bool(a)}, module says {bool(b)}")


def fmt(c: float, se: float | None = None) -> str:
    """0.951, or 0.951±.003 with a Monte Carlo standard error."""
    return f"{c:.3f}" if se is None else f"{c:.3f}±{se:.3f}".replace("±0.", "±.")


@cache
def part(successes: int, n: int):
    """``proportion(successes, n)``, remembered: the pooled and MOVER checks build the same parts often."""
    return proportion(successes, n)


def covers(est, truth: float) -> bool:
    return est.ci_low is not None and est.ci_low <= truth <= est.ci_high


def midp_covers(successes, n, p, level: float = LEVEL) -> np.ndarray:
    """Whether ``midp_bounds(successes, n)`` holds p, by inverting the mid-p test at p (vectorised).

    Mirrors :func:`evalcore.stats.estimates.midp_bounds`: the lower bound is where ``P(X > x) + P(X = x)/2``
    rises through alpha/2, so p >= low exactly when that tail at p is at least alpha/2 (likewise above);
    the bounds are widened to hold the observed rate, 0 successes have low 0 and n successes high 1.
    """
    x, size, p = np.broadcast_arrays(np.asarray(successes, float), np.asarray(n, float), np.asarray(p, float))
    x = np.clip(x, 0.0, size)
    tail = (1 - level) / 2
    tiny = 1e-300
    at_zero, at_n = x <= 1e-12, x >= size - 1e-12
    ge = np.where(at_zero, 1.0, betainc(np.maximum(x, tiny), size - x + 1, p))
    gt = np.where(at_n, 0.0, betainc(x + 1, np.maximum(size - x, tiny), p))
    upper_tail = 0.5 * (ge + gt)
    rate = x / size
    above_low = at_zero | (upper_tail >= tail) | (p >= rate)
    below_high = at_n | (1.0 - upper_tail >= tail) | (p <= rate)
    return above_low & below_high


# ----------------------------------------------------------------------------------------------- proportions


_TABLES: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}


def proportion_tables(n: int, results: Results) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Bounds of each method for every count 0..n (mid-p from the module, checked against ``proportion``)."""
    if n in _TABLES:
        return _TABLES[n]
    x = np.arange(n + 1, dtype=float)
    midp = midp_bounds(x, float(n))
    rate = x / n
    denominator = 1 + Z * Z / n
    centre = (rate + Z * Z / (2 * n)) / denominator
    half = Z * np.sqrt(rate * (1 - rate) / n + Z * Z / (4 * n * n)) / denominator
    wilson = (np.minimum(np.maximum(0.0, centre - half), rate), np.maximum(np.minimum(1.0, centre + half), rate))
    stderr = np.sqrt(rate * (1 - rate) / (n - 1))  # lm-eval's mean_stderr: sample sd (ddof=1) / sqrt(n)
    wald = (rate - Z * stderr, rate + Z * stderr)
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        est = proportion(k, n)
        values = np.r_[np.ones(k), np.zeros(n - k)]
        peer = mean_interval(values, method="wilson")
        if abs(est.ci_low - midp[0][k]) > 1e-12 or abs(est.ci_high - midp[1][k]) > 1e-12:
            results.mismatches.append(f"mid-p table n={n} x={k}")
        if abs(peer.ci_low - wilson[0][k]) > 1e-12 or abs(peer.ci_high - wilson[1][k]) > 1e-12:
            results.mismatches.append(f"Wilson table n={n} x={k}")
    _TABLES[n] = {"mid-p": midp, "Wilson": wilson, "plug-in normal": wald}
    return _TABLES[n]


def exact_coverage(n: int, p: np.ndarray, low: np.ndarray, high: np.ndarray, chunk: int = 64) -> np.ndarray:
    """P(low[X] <= p <= high[X]) for X ~ Binomial(n, p), for each p."""
    x = np.arange(n + 1)
    out = np.empty(p.size)
    for start in range(0, p.size, chunk):
        q = p[start : start + chunk]
        pmf = binom.pmf(x[:, None], n, q[None, :])
        inside = (low[:, None] <= q[None, :]) & (q[None, :] <= high[:, None])
        out[start : start + chunk] = np.sum(pmf * inside, axis=0)
    return out


def is_discrete(n: int, p: float) -> bool:
    """No run of consecutive counts has probability inside the band: no interval monotone in x reaches it."""
    cum = np.r_[0.0, np.cumsum(binom.pmf(np.arange(n + 1), n, p))]
    start = cum[:-1]
    end = np.searchsorted(cum, start + BAND[0] - 1e-15)  # first run end reaching the band's floor
    ok = end <= n + 1
    reached = cum[np.minimum(end, n + 1)] - start
    return not bool(np.any(ok & (reached >= BAND[0] - 1e-15) & (reached <= BAND[1] + 1e-15)))


def run_proportions(results: Results, quick: bool) -> None:
    print("== proportion: exact coverage (binomial pmf summed over the counts whose interval holds p)")
    print("   '*' = discrete: no run of consecutive counts has probability in [0.93, 0.975] at that (n, p)")
    grid = np.array(PROPORTION_P)
    fine = np.round(np.arange(0.01, 0.99 + 1e-9, 0.01 if quick else 0.001), 6)
    offsets = np.linspace(-0.25, 0.25, 21 if quick else 101)
    methods = ("mid-p", "Wilson", "plug-in normal")
    kinds = {"mid-p": "proportion: mid-p", "Wilson": "proportion: Wilson (peer)",
             "plug-in normal": "proportion: plug-in normal, lm-eval (peer)"}  # fmt: skip
    grid_rows: dict[str, list[str]] = {m: [] for m in methods}
    per_n = []
    for n in PROPORTION_N:
        tables = proportion_tables(n, results)
        discrete = [is_discrete(n, p) for p in grid]
        row = {}
        for method in methods:
            low, high = tables[method]
            at_grid = exact_coverage(n, grid, low, high)
            cells = []
            for p, c, d in zip(grid, at_grid, discrete):
                results.add(kinds[method], f"n={n} p={p:g}", n, c, None, d)
                cells.append(f"{c:.3f}{'*' if d else ' '}")
            grid_rows[method].append(f"{n:>6} " + " ".join(cells))
            over = exact_coverage(n, fine, low, high)
            near = exact_coverage(n, 1 / (1 + np.exp(-(logit(grid)[:, None] + offsets[None, :]).ravel())), low, high)
            smooth = near.reshape(grid.size, offsets.size).mean(axis=1)
            width = float(np.sum(binom.pmf(np.arange(n + 1), n, 0.5) * (high - low)))
            row[method] = (over.min(), over.mean(), over.max(), smooth.min(), smooth.max(), width)
        per_n.append((n, row))
    header = f"{'n':>6} " + " ".join(f"{p:<6g}" for p in grid)
    for method in methods:
        print(f"\n-- {kinds[method]}: coverage at n (rows) and p (columns)")
        print(header)
        print("\n".join(grid_rows[method]))
    print(f"\n-- per n, over p in [0.01, 0.99] ({fine.size} points): min / mean / max; 'smoothed': coverage averaged")
    print("   over logit(p) +- 0.25 at each grid p, min and max; 'width': expected width at p = 0.5")
    print(f"{'n':>6}  " + "  ".join(f"{m:<42}" for m in methods))
    print(f"{'':>6}  " + "  ".join(f"{'min   mean  max   smooth min-max  width':<42}" for _ in methods))
    for n, row in per_n:
        parts = []
        for method in methods:
            lo, mean, hi, slo, shi, width = row[method]
            parts.append(f"{lo:.3f} {mean:.3f} {hi:.3f} {slo:.3f}-{shi:.3f}     {width:.3f}".ljust(42))
        print(f"{n:>6}  " + "  ".join(parts))


# ------------------------------------------------------------------------------------------- bounded means


def t_covers(u: np.ndarray, truth: float, bounds=(0.0, 1.0)) -> np.ndarray:
    """``t_mean(values, bounds=bounds)`` holds truth (rows of u are data sets)."""
    n = u.shape[1]
    mean = u.mean(axis=1)
    se = u.std(axis=1, ddof=1) / math.sqrt(n)
    q = float(stdtrit(n - 1, 0.5 + LEVEL / 2))
    low, high = np.maximum(bounds[0], mean - q * se), np.minimum(bounds[1], mean + q * se)
    return (low <= truth) & (truth <= high)


def cluster_deff(u: np.ndarray, size: int) -> np.ndarray:
    """``cluster_design_effect`` for rows of u in consecutive clusters of ``size`` items."""
    rows, n = u.shape
    g = n // size
    if g < 2 or g == n:
        return np.ones(rows)
    resid = (u - u.mean(axis=1, keepdims=True)).reshape(rows, g, size).sum(axis=2)
    robust = g / (g - 1) * np.sum(resid**2, axis=1) / n**2
    naive = u.var(axis=1, ddof=1) / n
    return np.where(naive > 0, np.maximum(1.0, robust / np.where(naive > 0, naive, 1.0)), 1.0)


def bounded_covers(u: np.ndarray, truth: float, cluster_size: int | None = None) -> np.ndarray:
    """``bounded_mean(values[, clusters])`` holds truth (values in [0, 1], rows are data sets).

    The variance ratio is held in [DEFF_FLOOR_SMALL, 1] under SMALL_N values, else [DEFF_FLOOR, 1]; with
    clusters (2 <= G < n) the effective size is also divided by (t_{G-1} / z)^2. Binary values without
    clusters: the exact mid-p interval at n (ratio 1).
    """
    n = u.shape[1]
    m = u.mean(axis=1)
    binary = np.all((u == 0.0) | (u == 1.0), axis=1)
    bound_var = m * (1 - m)
    var = u.var(axis=1, ddof=1)
    floor = DEFF_FLOOR_SMALL if n < SMALL_N else DEFF_FLOOR
    ratio = np.where(binary | (bound_var <= 0), 1.0, np.clip(var / np.where(bound_var > 0, bound_var, 1.0), floor, 1.0))
    groups = n if cluster_size is None else n // cluster_size
    clustered = 2 <= groups < n
    deff = cluster_deff(u, cluster_size) if clustered else np.ones_like(m)
    effective = n / (ratio * deff)
    if clustered:
        effective = effective / (float(stdtrit(groups - 1, 0.5 + LEVEL / 2)) / Z) ** 2
    return midp_covers(m * effective, effective, truth)


def judge_draw(rng, rounds, n, mean, ties):
    draw = rng.random((rounds, n))
    wins = mean - ties / 2
    return np.where(draw < wins, 1.0, np.where(draw < wins + ties, 0.5, 0.0))


def passk_draw(rng, rounds, n, mean, concentration, table):
    rates = rng.beta(mean * concentration, (1 - mean) * concentration, size=(rounds, n))
    return table[rng.binomial(10, rates)]


def f1_draw(rng, rounds, n, zeros, ones):
    draw = rng.random((rounds, n))
    return np.where(draw < zeros, 0.0, np.where(draw < zeros + ones, 1.0, rng.random((rounds, n))))


def run_bounded(results: Results, rng, rounds: int) -> None:
    print(f"\n== bounded mean of non-binary values in [0, 1]: coverage ± MC s.e., R = {rounds} data sets a cell")
    table = np.asarray(pass_at_k(np.full(11, 10), np.arange(11), 5), dtype=float)
    settings = []
    for mean in (0.1, 0.3, 0.5, 0.7, 0.9):
        for share in (0.1, 0.4):
            ties = min(share, 2 * min(mean, 1 - mean))
            settings.append(("judge", f"mean {mean:g}, ties {ties:.2g}", mean,
                             lambda r, R, n, m=mean, t=ties: judge_draw(r, R, n, m, t)))  # fmt: skip
    for rate in (0.02, 0.1, 0.3, 0.6):
        for conc in (1.0, 10.0):
            a, b = rate * conc, (1 - rate) * conc
            truth = 1 - math.exp(betaln(a, b + 5) - betaln(a, b))  # E[1 - (1 - q)^5], q ~ Beta(a, b)
            settings.append(("pass@5", f"Beta mean {rate:g}, conc {conc:g}", truth,
                             lambda r, R, n, m=rate, c=conc: passk_draw(r, R, n, m, c, table)))  # fmt: skip
    for zeros, ones in ((0.8, 0.05), (0.5, 0.1), (0.2, 0.2), (0.1, 0.5), (0.02, 0.8)):
        truth = ones + (1 - zeros - ones) / 2
        settings.append(("F1-like", f"zeros {zeros:g}, ones {ones:g}", truth,
                         lambda r, R, n, z=zeros, o=ones: f1_draw(r, R, n, z, o)))  # fmt: skip
    kinds = ("bounded mean: mid-p-effective", "bounded mean: Student t (peer)")
    print(f"{'values':<8} {'setting':<26} {'truth':>6} {'interval':<10} " + " ".join(f"{'n=' + str(n):<12}" for n in MEAN_N))
    for family, setting, truth, draw in settings:
        lines = {kind: [] for kind in kinds}
        for n in MEAN_N:
            u = draw(rng, rounds, n)
            ours, peer = bounded_covers(u, truth), t_covers(u, truth)
            label = f"{family} {setting} n={n}"
            first = u[: results.checked]
            results.agree(kinds[0], label, ours, [covers(bounded_mean(v), truth) for v in first])
            results.agree(kinds[1], label, peer, [covers(t_mean(v, bounds=(0.0, 1.0)), truth) for v in first])
            for kind, hit in zip(kinds, (ours, peer)):
                c = results.add(kind, label, n, hit.mean(), rounds)
                lines[kind].append(fmt(c, results.cells[-1].se).ljust(12))
        for kind, name in zip(kinds, ("mid-p-eff", "t")):
            first = kind == kinds[0]
            print(f"{family if first else '':<8} {setting if first else '':<26} {f'{truth:.3f}' if first else '':>6} "
                  f"{name:<10} " + " ".join(lines[kind]))  # fmt: skip


def run_clustered(results: Results, rng, rounds: int) -> None:
    print(f"\n== clustered proportion: passages of {CLUSTER_SIZE} questions sharing a Beta random effect, R = {rounds}")
    kinds = ("clustered: mid-p-effective with clusters", "clustered: mid-p ignoring clusters (peer)")
    print(f"{'p':>5} {'ICC':>4} {'interval':<16} " + " ".join(f"{'n=' + str(n):<12}" for n in CLUSTER_N))
    for p in (0.05, 0.2, 0.5, 0.8, 0.95):
        for icc in (0.1, 0.3):
            conc = 1 / icc - 1
            lines = {kind: [] for kind in kinds}
            for n in CLUSTER_N:
                g = n // CLUSTER_SIZE
                rates = np.repeat(rng.beta(p * conc, (1 - p) * conc, size=(rounds, g)), CLUSTER_SIZE, axis=1)
                u = (rng.random((rounds, n)) < rates).astype(float)
                ours = bounded_covers(u, p, CLUSTER_SIZE)
                plain = midp_covers(u.sum(axis=1), n, p)
                labels = np.repeat(np.arange(g), CLUSTER_SIZE)
                label = f"p={p:g} ICC={icc:g} n={n}"
                first = u[: results.checked]
                results.agree(kinds[0], label, ours, [covers(bounded_mean(v, clusters=labels), p) for v in first])
                results.agree(kinds[1], label, plain, [covers(bounded_mean(v), p) for v in first])
                for kind, hit in zip(kinds, (ours, plain)):
                    c = results.add(kind, label, n, hit.mean(), rounds)
                    lines[kind].append(fmt(c, results.cells[-1].se).ljust(12))
            for kind, name in zip(kinds, ("with clusters", "without")):
                first = kind == kinds[0]
                print(f"{f'{p:g}' if first else '':>5} {f'{icc:g}' if first else '':>4} {name:<16} " + " ".join(lines[kind]))


# ---------------------------------------------------------------------------------------------------- averages


POOLED_CASES = [  # (sizes, true proportions): parts of very different sizes, the small ones far from the rest
    ((4, 1000), (0.5, 0.01)),
    ((10, 1000), (0.5, 0.02)),
    ((4,) + (1000,) * 9, (0.5,) + (0.02,) * 9),
    ((10,) * 3 + (1000,) * 10, (0.5,) * 3 + (0.03,) * 10),
    ((20, 500, 500, 500), (0.5, 0.02, 0.03, 0.97)),
    ((4, 4, 100, 100), (0.9, 0.1, 0.5, 0.5)),
]
POOLED_KINDS = ("pooled: micro average", "pooled: macro average", "pooled: macro, pooled only (peer)")


def mover_hits(values, lows, highs, w, truth, bounds) -> np.ndarray:
    """``mover(parts, w, bounds=bounds)`` holds truth: parts' values and bounds in columns, rows data sets."""
    value = values @ w
    low = np.maximum(bounds[0], value - np.sqrt(np.sum((w * (values - lows)) ** 2, axis=1)))
    high = np.minimum(bounds[1], value + np.sqrt(np.sum((w * (highs - values)) ** 2, axis=1)))
    low, high = np.minimum(low, value), np.maximum(high, value)
    return (low <= truth) & (truth <= high)


def midp_parts(results: Results, counts: np.ndarray, sizes) -> tuple[np.ndarray, np.ndarray]:
    """Each part's mid-p bounds (columns) for rows of counts, from the per-n tables."""
    tables = [proportion_tables(int(n), results)["mid-p"] for n in sizes]
    lows = np.column_stack([t[0][counts[:, i]] for i, t in enumerate(tables)])
    highs = np.column_stack([t[1][counts[:, i]] for i, t in enumerate(tables)])
    return lows, highs


def pooled_cell(results: Results, rng, rounds: int, sizes: np.ndarray, probs: np.ndarray, label: str) -> dict:
    """Coverage of the micro (``pooled``) and macro (``macro``) intervals for one configuration (recorded as
    cells), and of the macro average's pooled interval alone (the peer ``macro`` falls back from)."""
    k = sizes.size
    counts = rng.binomial(sizes, probs, size=(rounds, k))
    total = int(sizes.sum())
    first = counts[: max(1, results.checked // 2)]  # up to 60 parts a data set: half as many
    rows = [[part(int(x), int(m)) for x, m in zip(row, sizes)] for row in first]
    spread = sizes.max() > SPREAD_RATIO * sizes.min()
    got = {}
    for kind, weights in zip(POOLED_KINDS, (sizes / total, np.full(k, 1 / k), np.full(k, 1 / k))):
        truth = float(np.sum(weights * probs))
        values = counts / sizes
        value = values @ weights
        effective = 1 / float(np.sum(weights**2 / sizes))
        hit = midp_covers(np.clip(value, 0, 1) * effective, effective, truth)
        if kind == POOLED_KINDS[0]:
            module = [covers(pooled(parts, sizes), truth) for parts in rows]
        elif kind == POOLED_KINDS[2]:
            module = [covers(pooled(parts), truth) for parts in rows]
        else:
            if spread:  # the hull of two intervals that both hold the value: their union
                hit = hit | mover_hits(values, *midp_parts(results, counts, sizes), weights, truth, (0.0, 1.0))
            module = [covers(macro(parts), truth) for parts in rows]
        results.agree(kind, label, hit, module)
        got[kind] = (results.add(kind, label, total, hit.mean(), rounds), results.cells[-1].se)
    return got


def run_pooled(results: Results, rng, rounds: int, configs: int) -> None:
    print(f"\n== group averages of subtasks: R = {rounds} per configuration, {configs} configuration(s) per cell")
    print("   micro: pooled mid-p (estimates.pooled, weights n); macro: estimates.macro, the pooled mid-p interval, or the")
    print(f"   hull of it and MOVER where the parts' sizes differ more than {SPREAD_RATIO:g}x; 'pooled only': the macro")
    print("   average's pooled interval alone (peer). Subtask sizes and true proportions drawn once per configuration")
    print("   (sizes 4-1000: log-uniform); min and max over the configurations")
    print(f"{'subtasks':>8} {'sizes':<9} {'true p':<11} {'items':>12}  {'micro min':<12} {'micro max':<12} "
          f"{'macro min':<12} {'macro max':<12} {'pooled-only min':<15} {'max':<12}")  # fmt: skip
    for k in (2, 5, 20, 60):
        for lo_n, hi_n in ((4, 4), (4, 20), (10, 100), (100, 1000), (4, 1000)):
            for lo_p, hi_p in ((0.01, 0.99), (0.01, 0.1), (0.9, 0.99)):
                got = {kind: [] for kind in POOLED_KINDS}
                totals = []
                for config in range(configs):
                    if (lo_n, hi_n) == (4, 1000):
                        sizes = np.round(np.exp(rng.uniform(math.log(lo_n), math.log(hi_n), size=k))).astype(int)
                    else:
                        sizes = rng.integers(lo_n, hi_n + 1, size=k)
                    probs = rng.uniform(lo_p, hi_p, size=k)
                    totals.append(int(sizes.sum()))
                    label = f"{k} subtasks, sizes {lo_n}-{hi_n}, p {lo_p:g}-{hi_p:g}, config {config} (N={totals[-1]})"
                    for kind, pair in pooled_cell(results, rng, rounds, sizes, probs, label).items():
                        got[kind].append(pair)
                span = f"{min(totals)}-{max(totals)}" if len(totals) > 1 else str(totals[0])
                cols = []
                for kind in POOLED_KINDS:
                    cols += [fmt(*min(got[kind])).ljust(12), fmt(*max(got[kind])).ljust(12)]
                print(f"{k:>8} {f'{lo_n}-{hi_n}':<9} {f'{lo_p:g}-{hi_p:g}':<11} {span:>12}  " + " ".join(cols))
    print("\n-- chosen groups: parts of very different sizes (a small part far from the others' proportions)")
    print(f"{'sizes':<44} {'true p':<44} {'micro':<12} {'macro':<12} {'pooled only':<12}")
    for sizes, probs in POOLED_CASES:
        label = f"sizes {compact(sizes)} p {compact(probs)}"
        got = pooled_cell(results, rng, rounds, np.array(sizes), np.array(probs), label)
        print(f"{compact(sizes):<44} {compact(probs):<44} " + " ".join(fmt(*got[kind]).ljust(12) for kind in POOLED_KINDS))


def compact(values) -> str:
    """(4, 1000, 1000, 1000) as '4, 1000 x3'."""
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[i]:
            j += 1
        out.append(f"{values[i]:g}" + (f" x{j - i + 1}" if j > i else ""))
        i = j + 1
    return "(" + ", ".join(out) + ")"


MOVER_CASES = [  # (sizes, true proportions): chosen cases; random ones are added
    ((4, 1000), (0.95, 0.05)),  # a tiny benchmark with a high score beside a large one with a low score
    ((4, 10000), (0.99, 0.02)),
    ((4, 10000), (0.01, 0.99)),
    ((4, 114, 1000), (0.9, 0.3, 0.05)),
    ((4, 4), (0.5, 0.9)),
    ((5, 8, 10), (0.8, 0.9, 0.2)),
    ((10, 10000), (0.98, 0.5)),
    ((4, 20, 100, 500, 1000, 10000), (0.95, 0.8, 0.6, 0.4, 0.2, 0.02)),
    ((4, 4, 4, 4, 4, 4), (0.1, 0.25, 0.4, 0.6, 0.75, 0.9)),
    ((1000, 1000, 1000), (0.5, 0.7, 0.2)),
    ((10000, 10000), (0.01, 0.99)),
    ((30, 50, 200, 500), (0.3, 0.5, 0.6, 0.25)),
]


def normalise(v: np.ndarray, scale: np.ndarray, offset: np.ndarray, floors: np.ndarray) -> np.ndarray:
    """``mapped``'s arithmetic on arrays: ``offset + scale * v`` clipped to [floor, 100], part by part."""
    return np.clip(offset + scale * v, floors, 100.0)


def run_mover(results: Results, rng, rounds: int, random_cases: int) -> None:
    print(f"\n== MOVER board average of benchmarks (mid-p parts), raw and normalised: R = {rounds} a case")
    print("   normalised: parts mapped through (v - b) / (1 - b) * 100 with baselines 0.25, 0, 0.25, ... and clipped;")
    print("   the average clipped to [mean of the parts' floors, 100]; truth: the normalised true mean")
    cases = list(MOVER_CASES)
    for _ in range(random_cases):
        k = int(rng.integers(2, 7))
        sizes = tuple(int(s) for s in rng.choice(PROPORTION_N, size=k))
        cases.append((sizes, tuple(float(p) for p in np.round(rng.uniform(0.01, 0.99, size=k), 2))))
    kinds = ("mover: raw board average", "mover: normalised board average")
    print(f"{'sizes':<34} {'true p':<36} {'raw':<12} {'normalised':<12}")
    for sizes, probs in cases:
        k = len(sizes)
        sizes_a, probs_a = np.array(sizes), np.array(probs)
        w = np.full(k, 1 / k)
        counts = rng.binomial(sizes_a, probs_a, size=(rounds, k))
        lows, highs = midp_parts(results, counts, sizes)
        values = counts / sizes_a
        baselines = np.array([0.25 if i % 2 == 0 else 0.0 for i in range(k)])
        scale, offset = 100 / (1 - baselines), -baselines * 100 / (1 - baselines)
        floors = offset.copy()
        norm = partial(normalise, scale=scale, offset=offset, floors=floors)

        label = f"sizes {sizes} p {probs}"
        total = int(sizes_a.sum())
        line = []
        for kind, (v, lo, hi, truth, bounds) in zip(kinds, (
            (values, lows, highs, float(probs_a.mean()), (0.0, 1.0)),
            (norm(values), norm(lows), norm(highs), float(norm(probs_a).mean()), (float(floors.mean()), 100.0)),
        )):  # fmt: skip
            hit = mover_hits(v, lo, hi, w, truth, bounds)
            module = []
            for row in counts[: results.checked]:
                parts = [part(int(x), int(n)) for x, n in zip(row, sizes)]
                if kind == kinds[1]:
                    parts = [mapped(p, s, o, bounds=(f, 100.0)) for p, s, o, f in zip(parts, scale, offset, floors)]
                module.append(covers(mover(parts, bounds=bounds), truth))
            results.agree(kind, label, hit, module)
            c = results.add(kind, label, total, hit.mean(), rounds)
            line.append(fmt(c, results.cells[-1].se).ljust(12))
        print(f"{str(sizes):<34} {str(probs):<36} " + " ".join(line))


# ------------------------------------------------------------------------------------------------------ ratios


def ratio_draw(rng, rounds: int, n: int, sigma: float, mu: float, spread: float):
    """(log-likelihoods, units), rows data sets: log-normal lengths (median 150), per-token loss mu + N(0, spread^2)
    a document plus token noise. The population ratio sum(ll) / sum(units) is -mu."""
    units = np.maximum(1.0, np.round(np.exp(rng.normal(math.log(150), sigma, (rounds, n)))))
    loss = units * (mu + spread * rng.standard_normal((rounds, n))) + np.sqrt(units) * rng.standard_normal((rounds, n))
    return -loss, units


def delta_t_covers(a: np.ndarray, b: np.ndarray, truth: float) -> np.ndarray:
    """``ratio_of_sums(a, b)`` (the interval of ``ratio_value``'s R) holds truth; rows are data sets."""
    n = a.shape[1]
    total = b.sum(axis=1)
    ratio = a.sum(axis=1) / total
    se = np.sqrt(n / (n - 1) * np.sum((a - ratio[:, None] * b) ** 2, axis=1)) / total
    df = np.maximum(1.0, total**2 / np.sum(b**2, axis=1) - 1.0)
    q = stdtrit(df, 0.5 + LEVEL / 2)
    return (ratio - q * se <= truth) & (truth <= ratio + q * se)


def bootstrap_covers(a: np.ndarray, b: np.ndarray, truth: float) -> np.ndarray:
    """The percentile bootstrap ``ratio_value`` used before (and still where a document has no units), seeded
    by the data set's row, holds the true perplexity."""
    n = a.shape[1]
    hits = np.empty(a.shape[0], dtype=bool)
    for i in range(a.shape[0]):
        draws = np.random.default_rng(i).integers(0, n, size=(BOOTSTRAP_ROUNDS, n))
        stats = np.exp(-a[i][draws].sum(axis=1) / b[i][draws].sum(axis=1))
        value = math.exp(-float(np.sum(a[i])) / float(np.sum(b[i])))
        low, high = (float(q) for q in np.percentile(stats, [2.5, 97.5]))
        hits[i] = min(low, value) <= truth <= max(high, value)
    return hits


def module_bootstrap(a: np.ndarray, b: np.ndarray, seed: int):
    """The module's bootstrap for one data set (``ratio_statistic`` per draw, ``bootstrap_value``)."""
    draws = np.random.default_rng(seed).integers(0, a.size, size=(BOOTSTRAP_ROUNDS, a.size))
    stats = [ratio_statistic("perplexity", a[d], b[d]) for d in draws]
    return bootstrap_value(ratio_statistic("perplexity", a, b), stats, a.size, higher_is_better=False)


def run_ratio(results: Results, rng, rounds: int, boot_rounds: int) -> None:
    mu, spread = 2.5, 0.5
    truth = math.exp(mu)
    print(f"\n== ratio metric (perplexity over documents): ratio_value's delta-method t interval (delta-t, R = {rounds}")
    print(f"   a cell) and the percentile bootstrap it replaced (peer, on the first {boot_rounds} of the same data sets,")
    print(f"   n <= {max(BOOT_N)}); documents: log-normal lengths (median 150 tokens, sigma 0.8 or 1.5), per-token loss")
    print(f"   {mu} + N(0, {spread}^2) a document + token noise; truth exp({mu}) = {truth:.3f}")
    kinds = ("ratio: delta-t", "ratio: percentile bootstrap (peer)")
    print(f"{'lengths':<10} {'interval':<10} " + " ".join(f"{'n=' + str(n):<12}" for n in RATIO_N))
    for sigma in RATIO_SIGMA:
        lines = {kind: [] for kind in kinds}
        for n in RATIO_N:
            a, b = ratio_draw(rng, rounds, n, sigma, mu, spread)
            label = f"lengths sigma {sigma:g} n={n}"
            hit = delta_t_covers(a, b, -mu)
            results.agree(kinds[0], label, hit, [covers(ratio_value("perplexity", a[i], b[i]), truth)
                                                 for i in range(results.checked)])  # fmt: skip
            c = results.add(kinds[0], label, n, hit.mean(), rounds)
            lines[kinds[0]].append(fmt(c, results.cells[-1].se).ljust(12))
            if n not in BOOT_N:
                lines[kinds[1]].append("-".ljust(12))
                continue
            hit = bootstrap_covers(a[:boot_rounds], b[:boot_rounds], truth)
            results.agree(kinds[1], label, hit, [covers(module_bootstrap(a[i], b[i], i), truth)
                                                 for i in range(min(results.checked, boot_rounds))])  # fmt: skip
            c = results.add(kinds[1], label, n, hit.mean(), boot_rounds)
            lines[kinds[1]].append(fmt(c, results.cells[-1].se).ljust(12))
        for kind, name in zip(kinds, ("delta-t", "bootstrap")):
            first = kind == kinds[0]
            print(f"{f'sigma {sigma:g}' if first else '':<10} {name:<10} " + " ".join(lines[kind]))


# ----------------------------------------------------------------------------------------------------- summary


SIZE_BANDS = ((1, 9), (10, 29), (30, 99), (100, 999), (1000, None))


def print_by_size(results: Results) -> None:
    """Per kind and band of n: cells, and the least, mean and largest coverage over them."""
    print("\n== coverage by kind and n (items; a group's or board's total): cells, min / mean / max over the cells")
    names = [f"n {lo}-{hi}" if hi else f"n >= {lo}" for lo, hi in SIZE_BANDS]
    print(f"{'kind':<44} " + " ".join(f"{name:<23}" for name in names))
    for kind in results.kinds:
        cols = []
        for lo, hi in SIZE_BANDS:
            got = [c.coverage for c in results.cells if c.kind == kind and lo <= c.n and (hi is None or c.n <= hi)]
            cols.append(f"{len(got):>3} {min(got):.3f} {np.mean(got):.3f} {max(got):.3f}" if got else "  -")
        print(f"{kind:<44} " + " ".join(f"{col:<23}" for col in cols))


def summarise(results: Results) -> None:
    print("\n== summary: coverage of the nominal 95% per kind (target: within [0.93, 0.975] wherever n >= 10,")
    print("   never below 0.90); '*' discrete cell (see above), '(MC)' within 2 Monte Carlo s.e. of the band")
    for kind in results.kinds:
        cells = [c for c in results.cells if c.kind == kind]
        big = [c for c in cells if c.n >= MIN_N]
        outside = [c for c in big if not BAND[0] <= c.coverage <= BAND[1]]
        low = [c for c in cells if c.coverage < FLOOR]
        discrete = sum(c.discrete for c in outside)
        lo_big = f"{min(c.coverage for c in big):.3f}" if big else "-"
        hi_big = f"{max(c.coverage for c in big):.3f}" if big else "-"
        print(f"summary {kind}: n>=10 min {lo_big} max {hi_big} ({len(big)} cells); all sizes min "
              f"{min(c.coverage for c in cells):.3f} ({len(cells)} cells); outside [0.93, 0.975] at n>=10: "
              f"{len(outside)}" + (f" ({discrete} discrete)" if discrete else "") + f"; below 0.90: {len(low)}")  # fmt: skip
        for title, chosen in (("outside the band at n >= 10", outside), ("below 0.90", low)):
            if not chosen:
                continue
            shown = sorted(chosen, key=lambda c: c.coverage)
            limit = 12
            items = []
            for c in shown[:limit]:
                mark = "*" if c.discrete else ""
                near = c.rounds is not None and (BAND[0] - 2 * c.se <= c.coverage <= BAND[1] + 2 * c.se)
                items.append(f"{c.label}: {fmt(c.coverage, None if c.rounds is None else c.se)}{mark}{' (MC)' if near else ''}")
            more = f"; ... and {len(shown) - limit} more" if len(shown) > limit else ""
            print(f"    {title}: " + "; ".join(items) + more)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10000, help="simulated data sets per Monte Carlo cell")
    parser.add_argument("--ratio-rounds", type=int, default=1000, help="data sets per ratio cell for the bootstrap peer (slow)")
    parser.add_argument("--configs", type=int, default=3, help="drawn configurations per pooled cell")
    parser.add_argument("--random-cases", type=int, default=24, help="random board averages beside the chosen ones")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke run: few rounds, one configuration")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.ratio_rounds, args.configs, args.random_cases = 200, 20, 1, 2
    for name in ("rounds", "ratio_rounds", "configs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, not {getattr(args, name)}")
    if args.random_cases < 0:
        parser.error(f"--random-cases must be at least 0, not {args.random_cases}")
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    results = Results(checked=2 if args.quick else CHECKED)
    print(f"bench/intervals.py: level {LEVEL}, rounds {args.rounds}, ratio rounds {args.ratio_rounds}, "
          f"configurations {args.configs}, random board cases {args.random_cases}, seed {args.seed}"
          + (" (quick)" if args.quick else ""))  # fmt: skip
    run_proportions(results, args.quick)
    run_bounded(results, rng, args.rounds)
    run_clustered(results, rng, args.rounds)
    run_pooled(results, rng, args.rounds, args.configs)
    run_mover(results, rng, args.rounds, args.random_cases)
    run_ratio(results, rng, args.rounds, args.ratio_rounds)
    print_by_size(results)
    summarise(results)
    if results.mismatches:
        print(f"MISMATCH between the vectorised copies and evalcore.stats.estimates ({len(results.mismatches)}):")
        for line in results.mismatches[:20]:
            print(f"    {line}")
        return 1
    print(f"copies agree with evalcore.stats.estimates on every checked data set ({results.checked} a cell)")
    print(f"elapsed {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
