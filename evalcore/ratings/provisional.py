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
from scipy.optimize import brentq
from scipy.signal import fftconvolve
from scipy.special import expit, log_expit
from scipy.stats import binom

from evalcore.ratings.counts import PairCounts
from evalcore.ratings.result import ELO_PER_LOGIT, RatingResult
from evalcore.validation import check_integer, check_level

DEFAULT_MIN_BATTLES = 300
_SPAN = 60.0  # logits searched beyond the opponents' range (60 logits ~ 10,000 Elo points)


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


def _pmf(x: float, theta_opp: np.ndarray, n_opp: np.ndarray) -> np.ndarray:
    """Distribution of the number of wins, shape (sum(n_opp) + 1,): a sum of binomials."""
    pmf = np.ones(1)
    for theta, n in zip(theta_opp, n_opp):
        part = binom.pmf(np.arange(n + 1), n, expit(x - theta))
        pmf = fftconvolve(pmf, part) if pmf.size * part.size > 250_000 else np.convolve(pmf, part)
    return np.clip(pmf, 0.0, None)


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
    a, b = float(theta_opp.min()) - _SPAN, float(theta_opp.max()) + _SPAN

    def at_least(x):  # P_x(S >= wins) - alpha/2, increasing in x
        if wins == n:
            return float(np.sum(n_opp * log_expit(x - theta_opp))) - math.log(half_alpha)
        return float(_pmf(x, theta_opp, n_opp)[wins:].sum()) - half_alpha

    def at_most(x):  # P_x(S <= wins) - alpha/2, decreasing in x
        if wins == 0:
            return float(np.sum(n_opp * log_expit(theta_opp - x))) - math.log(half_alpha)
        return float(_pmf(x, theta_opp, n_opp)[: wins + 1].sum()) - half_alpha

    low = -math.inf if wins == 0 else _root(at_least, a, b, -math.inf)
    high = math.inf if wins == n else _root(at_most, a, b, math.inf)
    return low, high


def _root(f, a: float, b: float, unbracketed: float) -> float:
    fa, fb = f(a), f(b)
    if fa == 0.0:
        return a
    if np.sign(fa) == np.sign(fb):
        return unbracketed
    return float(brentq(f, a, b, xtol=1e-10))


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
