"""Provisional ratings: models with too few battles, or a record of all wins or all losses.

A model is **provisional** when it took part in fewer than ``min_battles`` battles (default 300, the
arena's new-model threshold), or when it never lost or never won a decisive battle (ties aside). For
such a model a Bradley-Terry fit says little: with a separable record the MLE is infinite, a prior makes
it finite but arbitrary, and every bootstrap resample of "20 wins out of 20" is again 20 out of 20, so the
percentile interval is narrow around a number the prior chose.

Its interval is therefore widened to hold an exact one: with the opponents' ratings fixed at their
fitted values, the number of decisive wins ``S`` of the model is a sum of independent Bernoulli
variables with ``P(win against o) = sigmoid(x - theta_o)``; ``S`` grows with the model's strength ``x``,
so inverting the exact test gives a Clopper-Pearson interval on the BT scale::

    lower: P_x(S >= s) = alpha / 2    (minus infinity when s = 0)
    upper: P_x(S <= s) = alpha / 2    (plus infinity when s = n)

Against a single opponent this is exactly the Clopper-Pearson interval of the win probability mapped
through the logit: 20 wins of 20 give ``p >= 0.025 ** (1 / 20) = 0.832``, i.e. the model is at least
``ELO_PER_LOGIT * logit(0.832) = 277`` points above its opponent, with no upper bound. The record used is
the model's decisive battles against rated (not provisional) opponents, or against every opponent when it
met no rated one. The reported interval is the hull of this exact interval and the method's own.

Provisional models take no rank 1 (their rank is at least 2 whenever a rated model exists), and they do
not count in rated models' ranks: ``rank`` and ``rank_ub`` of a rated model count rated models only.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.special import betaincinv, expit, gammaln, log_expit

from evalcore.boundary.validation import check_integer, check_level
from evalcore.ratings.counts import PairCounts
from evalcore.ratings.result import ELO_PER_LOGIT, RatingResult

DEFAULT_MIN_BATTLES = 300


def record_per_model(counts: PairCounts) -> tuple[np.ndarray, np.ndarray]:
    """Decisive wins and losses of each model, shape (m,) each (ties of both kinds left out)."""
    m = counts.n_models
    wins = np.bincount(counts.i, counts.wins_i, minlength=m) + np.bincount(counts.j, counts.wins_j, minlength=m)
    losses = np.bincount(counts.i, counts.wins_j, minlength=m) + np.bincount(counts.j, counts.wins_i, minlength=m)
    return wins, losses


def provisional_mask(counts: PairCounts, *, min_battles: int = DEFAULT_MIN_BATTLES) -> np.ndarray:
    """Which models are provisional, bool shape (m,): fewer than ``min_battles`` battles (all outcomes),
    or no decisive win, or no decisive loss."""
    min_battles = check_integer(min_battles, "min_battles", minimum=0)
    wins, losses = record_per_model(counts)
    return (counts.battles_per_model() < min_battles) | (wins == 0) | (losses == 0)


def _opponent_record(counts: PairCounts, k: int, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Opponents of model ``k`` within ``reference`` (bool (m,)): their indices, decisive battles with each,
    and k's total decisive wins against them."""
    as_i = counts.i == k
    as_j = counts.j == k
    opp = np.concatenate([counts.j[as_i], counts.i[as_j]])
    won = np.concatenate([counts.wins_i[as_i], counts.wins_j[as_j]])
    lost = np.concatenate([counts.wins_j[as_i], counts.wins_i[as_j]])
    keep = reference[opp] & (won + lost > 0)
    return opp[keep], np.rint(won[keep] + lost[keep]).astype(np.int64), int(round(float(won[keep].sum())))


_DIRECT_MAX = 2000  # decisive battles up to which the pmf is built by direct convolution


class _WinsDistribution:
    """The distribution of the number of wins, a sum of one binomial per opponent, as a function of x.

    Up to :data:`_DIRECT_MAX` battles: direct convolution of the binomial pmfs (log binomial coefficients
    computed once). Beyond: the discrete Fourier transform of the generating function
    ``prod_o (1 - p_o + p_o z) ** n_o`` at the roots of unity, O(q n) per call instead of O(n^2); the
    integer powers make the complex logarithm's branch irrelevant. Both are exact up to round-off
    (about 1e-15, far below the alpha/2 tails solved for).
    """

    def __init__(self, theta_opp: np.ndarray, n_opp: np.ndarray):
        self.theta, self.n = theta_opp, n_opp
        self.size = int(n_opp.sum()) + 1
        self.direct = self.size <= _DIRECT_MAX + 1
        if self.direct:
            self.terms = []
            for n in n_opp:
                k = np.arange(n + 1, dtype=np.float64)
                self.terms.append((k, n - k, gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)))
        else:
            self.roots = np.exp(2j * np.pi * np.arange(self.size) / self.size)[None, :]

    def pmf(self, x: float) -> np.ndarray:
        """P(S = s) for s = 0..n, shape (n + 1,)."""
        if self.direct:
            pmf = np.ones(1)
            for theta, (k, rest, log_choose) in zip(self.theta, self.terms):
                pmf = np.convolve(pmf, np.exp(log_choose + k * log_expit(x - theta) + rest * log_expit(theta - x)))
            return pmf
        p = expit(x - self.theta)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            log_gf = (self.n[:, None] * np.log(1.0 - p + p * self.roots)).sum(axis=0)
        pmf = np.fft.fft(np.exp(log_gf)).real / self.size
        return np.clip(np.nan_to_num(pmf, nan=0.0), 0.0, None)


def exact_interval(theta_opp: np.ndarray, n_opp: np.ndarray, wins: int, *, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a model's strength, logit scale, given its opponents' strengths.

    Parameters
    ----------
    theta_opp : ndarray, shape (q,)
        Opponents' strengths (logit scale).
    n_opp : ndarray of int, shape (q,)
        Decisive battles against each.
    wins : int
        Decisive wins in all.
    level : float

    Returns
    -------
    (low, high) : float
        ``-inf`` / ``+inf`` on the side a record of no win / no loss leaves open.
    """
    check_level(level)
    n = int(n_opp.sum())
    if n == 0:
        return -math.inf, math.inf
    half_alpha = (1.0 - level) / 2.0
    weakest, strongest = float(theta_opp.min()), float(theta_opp.max())
    dist = _WinsDistribution(theta_opp, n_opp) if 0 < wins < n and weakest < strongest else None

    def at_least(x):  # P_x(S >= wins) - alpha/2, increasing in x
        if wins == n:
            return float(np.sum(n_opp * log_expit(x - theta_opp))) - math.log(half_alpha)
        return float(dist.pmf(x)[wins:].sum()) - half_alpha

    def at_most(x):  # P_x(S <= wins) - alpha/2, decreasing in x
        if wins == 0:
            return float(np.sum(n_opp * log_expit(theta_opp - x))) - math.log(half_alpha)
        return float(dist.pmf(x)[: wins + 1].sum()) - half_alpha

    # Against opponents all as weak as the weakest (as strong as the strongest) the bound is the
    # Clopper-Pearson one through the logit; the true bound lies between the two.
    low = high = None
    if wins == 0:
        low = -math.inf
    else:
        p_low = float(betaincinv(wins, n - wins + 1, half_alpha))
        low = _root(at_least, weakest + _logit(p_low), strongest + _logit(p_low))
    if wins == n:
        high = math.inf
    else:
        p_high = float(betaincinv(wins + 1, n - wins, 1.0 - half_alpha))
        high = _root(at_most, weakest + _logit(p_high), strongest + _logit(p_high))
    return low, high


def _logit(p: float) -> float:
    p = min(max(p, 1e-300), 1.0 - 1e-16)
    return math.log(p) - math.log1p(-p)


def _root(f, a: float, b: float) -> float:
    """The root of a monotone ``f`` known to lie in ``[a, b]`` (a single point when ``a == b``)."""
    if b - a < 1e-12:
        return a
    a, b = a - 1e-9, b + 1e-9
    fa, fb = f(a), f(b)
    if fa == 0.0 or np.sign(fa) == np.sign(fb):  # round-off at the bracket's edge
        return a if abs(fa) <= abs(fb) else b
    from scipy.optimize import brentq  # here: scipy.optimize adds 0.17 s to every process's start

    return float(brentq(f, a, b, xtol=1e-8))  # 1e-8 logits: 2e-6 rating points


def _ranks(result: RatingResult, lo: np.ndarray, hi: np.ndarray, provisional: np.ndarray):
    """``rank``, ``rank_ub`` and rank intervals counting rated models only; provisional ones never 1.

    A rated model's bootstrap rank interval counted every model; without the samples it is widened to an
    outer bound: its best rank drops by the provisional models that could have been above it.
    """
    rated = ~provisional
    # With no rated model at all (a young arena), every model counts, as without the rule.
    ref = rated if rated.any() else np.ones_like(rated)
    ratings = result.ratings
    rank = 1 + (ratings[ref][None, :] > ratings[:, None]).sum(axis=1)
    rank_ub = 1 + (lo[ref][None, :] > hi[:, None]).sum(axis=1)
    worst = 1 + (hi[ref][None, :] >= lo[:, None]).sum(axis=1) - ref.astype(np.int64)
    floor = 2 if rated.any() else 1
    rank = np.where(provisional, np.maximum(rank, floor), rank)
    rank_ub = np.where(provisional, np.maximum(rank_ub, floor), rank_ub)
    rank_ci_low, rank_ci_high = result.rank_ci_low, result.rank_ci_high
    if rank_ci_low is not None and rank_ci_high is not None:
        maybe_above = (result.ci_high[provisional][None, :] >= result.ci_low[:, None]).sum(axis=1)
        best = np.maximum(1, np.minimum(rank_ci_low - maybe_above, rank))
        rank_ci_low = np.where(provisional, rank_ub, best)
        rank_ci_high = np.where(
            provisional, np.maximum(worst, rank_ub), np.maximum(np.minimum(rank_ci_high, ref.sum()), rank)
        )
    return rank, rank_ub, rank_ci_low, rank_ci_high


def mark_provisional(
    result: RatingResult, counts: PairCounts, *, min_battles: int = DEFAULT_MIN_BATTLES
) -> RatingResult:
    """Flag provisional models in ``result``, widen their intervals to the exact ones, and re-rank.

    Parameters
    ----------
    result : RatingResult
        Any method's result over the models of ``counts`` (same order).
    counts : PairCounts
        The battles the result was fitted on.
    min_battles : int
        Models with fewer battles than this are provisional (0: only all-wins/all-losses records).

    Returns
    -------
    RatingResult
        A copy with ``provisional`` set (bool, shape (m,)), ``ci_low``/``ci_high`` of provisional models
        widened (possibly to infinity), ``rank``, ``rank_ub`` and rank intervals recomputed, and a note.
    """
    if tuple(result.models) != tuple(counts.models):
        raise ValueError("the result and the counts name different models")
    provisional = provisional_mask(counts, min_battles=min_battles)
    lo, hi = result.ci_low.astype(np.float64, copy=True), result.ci_high.astype(np.float64, copy=True)
    theta = result.ratings / ELO_PER_LOGIT
    anchor = result.models.index(result.anchor[0]) if result.anchor else -1
    rated = ~provisional
    for k in np.flatnonzero(provisional):
        if k == anchor:
            continue
        opp, n_opp, wins = _opponent_record(counts, k, rated)
        if n_opp.size == 0:
            opp, n_opp, wins = _opponent_record(counts, k, np.ones_like(rated))
        if n_opp.size == 0:
            low, high = -math.inf, math.inf
        else:
            low, high = exact_interval(theta[opp], n_opp, wins, level=result.level)
        lo[k] = min(lo[k], low * ELO_PER_LOGIT)
        hi[k] = max(hi[k], high * ELO_PER_LOGIT)
    rank, rank_ub, rank_ci_low, rank_ci_high = _ranks(result, lo, hi, provisional)
    notes = list(result.notes)
    if provisional.any():
        notes.append(
            f"{int(provisional.sum())} provisional model(s) (fewer than {min_battles} battles, or all wins or all "
            "losses): their intervals include the exact binomial bounds of their record against rated "
            "opponents; they take no rank 1 and do not count in other models' ranks"
        )
    return dataclasses.replace(
        result, ci_low=lo, ci_high=hi, rank=rank, rank_ub=rank_ub, rank_ci_low=rank_ci_low,
        rank_ci_high=rank_ci_high, provisional=provisional, provisional_min_battles=min_battles,
        notes=tuple(notes),
    )  # fmt: skip
