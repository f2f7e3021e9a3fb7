"""Online Elo and the vote-order permutation study.

Online Elo replays battles one by one (``tstamp`` order when present, else file order) and moves both
ratings by ``k * (score - expected)``, with ``expected = 1 / (1 + base ** ((r_b - r_a) / scale))``. The
result depends on the order of the votes; :func:`elo_permutation_study` measures how much, by replaying
the same votes in N random orders (all orders advance together, one vectorised step per battle).

The replay can be continued: ``start`` (the ratings after the first ``skip`` battles, from an earlier
replay) and ``skip`` replay only the rest, with the same arithmetic in the same order, so the result is
bit for bit the full replay's (the arena's refit keeps each category's state between refits).
"""

from __future__ import annotations

import math

import numpy as np

from evalcore.boundary.validation import check_integer, check_level
from evalcore.ratings.battles import A_WINS, B_WINS, BOTHBAD, Battles
from evalcore.ratings.counts import check_ties_policy
from evalcore.ratings.result import RatingResult, conservative_rank, percentile_interval, ranks_from_ratings


def _scores_and_mask(battles: Battles, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Score of side A per battle (1, 0, 0.5) and which battles count under the ties policy."""
    check_ties_policy(ties)
    out = battles.outcome
    score = np.where(out == A_WINS, 1.0, np.where(out == B_WINS, 0.0, 0.5))
    if ties == "half":
        keep = np.ones(out.shape, dtype=bool)
    elif ties == "drop":
        keep = out <= B_WINS
    else:
        keep = out != BOTHBAD
    return score, keep


def _battle_order(battles: Battles) -> np.ndarray | None:
    """Replay order: ``tstamp`` order (stable), or None when that is file order (no timestamps, or
    timestamps already non-decreasing, as votes read in id order are), which saves the gathers."""
    ts = battles.tstamp
    if ts is None or bool(np.all(ts[1:] >= ts[:-1])):
        return None
    return np.argsort(ts, kind="stable")


def elo_ratings(
    battles: Battles,
    *,
    k: float = 4.0,
    base: float = 10.0,
    scale: float = 400.0,
    initial: float = 1000.0,
    ties: str = "half",
    order: np.ndarray | None = None,
    start: np.ndarray | None = None,
    skip: int = 0,
) -> np.ndarray:
    """Final online Elo ratings, shape (m,), in ``models`` order.

    Parameters
    ----------
    battles : Battles
    k, base, scale, initial : float
        Update step, odds base, scale and starting rating.
    ties : {"half", "drop", "drop-bothbad"}
        ``half`` scores a tie 0.5 for each side; the drop policies skip those battles.
    order : ndarray of int, shape (n,), optional
        Replay order; default ``tstamp`` order, else file order.
    start : ndarray, shape (m,), optional
        Ratings to start from instead of ``initial`` for every model.
    skip : int
        Battles (in file order, which must then be the replay order: no ``order``, timestamps sorted)
        already replayed into ``start``.
    """
    score, keep = _scores_and_mask(battles, ties)
    skip = check_integer(skip, "skip", minimum=0)
    if skip:
        if start is None or order is not None or _battle_order(battles) is not None or skip > len(battles):
            raise ValueError("skip needs start ratings and battles in replay order (sorted timestamps)")
        battles = Battles(
            battles.models, battles.model_a[skip:], battles.model_b[skip:], battles.outcome[skip:]
        )
        score, keep = score[skip:], keep[skip:]
    if order is None:
        order = _battle_order(battles)
    if order is None:  # file order: gather only when a ties policy drops battles
        order = None if keep.all() else np.flatnonzero(keep)
    else:
        order = order[keep[order]]
    if start is None:
        ratings = [float(initial)] * battles.n_models
    else:
        if np.shape(start) != (battles.n_models,) or not np.all(np.isfinite(start)):
            raise ValueError(f"start must hold {battles.n_models} finite ratings")
        ratings = [float(r) for r in start]
    if order is None:
        a_list, b_list, s_list = battles.model_a.tolist(), battles.model_b.tolist(), score.tolist()
    else:
        a_list = battles.model_a[order].tolist()
        b_list = battles.model_b[order].tolist()
        s_list = score[order].tolist()
    log_base = math.log(base)
    exp = math.exp
    for a, b, s in zip(a_list, b_list, s_list):
        ra = ratings[a]
        rb = ratings[b]
        delta = k * (s - 1.0 / (1.0 + exp((rb - ra) / scale * log_base)))
        ratings[a] = ra + delta
        ratings[b] = rb - delta
    return np.asarray(ratings)


def elo_permutation_study(
    battles: Battles,
    *,
    permutations: int = 100,
    rng: np.random.Generator,
    k: float = 4.0,
    base: float = 10.0,
    scale: float = 400.0,
    initial: float = 1000.0,
    ties: str = "half",
) -> np.ndarray:
    """Online Elo over random orders of the same votes.

    Returns
    -------
    ndarray, shape (permutations, m)
        Final ratings for each order; the column spread is how much Elo depends on vote order.
    """
    permutations = check_integer(permutations, "permutations", minimum=1)
    score, keep = _scores_and_mask(battles, ties)
    idx = np.flatnonzero(keep)
    a_all, b_all, s_all = battles.model_a[idx], battles.model_b[idx], score[idx]
    n = idx.size
    orders = np.argsort(rng.random((permutations, n)), axis=1)  # (P, n) independent random orders
    ratings = np.full((permutations, battles.n_models), float(initial))
    rows = np.arange(permutations)
    factor = math.log(base) / scale
    for t in range(n):
        col = orders[:, t]
        a, b, s = a_all[col], b_all[col], s_all[col]
        ra = ratings[rows, a]
        rb = ratings[rows, b]
        delta = k * (s - 1.0 / (1.0 + np.exp((rb - ra) * factor)))
        ratings[rows, a] = ra + delta
        ratings[rows, b] = rb - delta
    return ratings


def online_elo(
    battles: Battles,
    *,
    k: float = 4.0,
    base: float = 10.0,
    scale: float = 400.0,
    initial: float = 1000.0,
    ties: str = "half",
    permutations: int = 0,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    start: np.ndarray | None = None,
    skip: int = 0,
) -> RatingResult:
    """Online Elo as a :class:`RatingResult`, optionally with a permutation interval.

    Parameters
    ----------
    battles : Battles
    k, base, scale, initial, ties
        See :func:`elo_ratings`.
    permutations : int
        When > 0, replay the votes in this many random orders; ``ci_low``/``ci_high`` are then the
        percentile interval over orders and ``se`` the standard deviation over orders.
    rng : numpy Generator
        Required when ``permutations > 0``.
    start, skip
        Continue an earlier replay of the first ``skip`` battles (see :func:`elo_ratings`); the
        permutation study replays every battle.
    """
    check_level(level)
    permutations = check_integer(permutations, "permutations", minimum=0)
    if len(battles) == 0:
        raise ValueError("no battles to rate")
    ratings = elo_ratings(
        battles, k=k, base=base, scale=scale, initial=initial, ties=ties, start=start, skip=skip
    )
    m = battles.n_models
    played = np.bincount(battles.model_a, minlength=m) + np.bincount(battles.model_b, minlength=m)
    notes = [
        f"online Elo: K={k:g}, base {base:g}, scale {scale:g}, initial {initial:g}; depends on vote order"
    ]
    if permutations > 0:
        if rng is None:
            raise ValueError("rng is required for a permutation study")
        samples = elo_permutation_study(
            battles,
            permutations=permutations,
            rng=rng,
            k=k,
            base=base,
            scale=scale,
            initial=initial,
            ties=ties,
        )
        lo, hi = percentile_interval(samples, level)
        se = samples.std(axis=0)
        interval = "permutation"
        notes.append(f"interval: spread over {permutations} random vote orders, not sampling uncertainty")
    else:
        samples = None
        lo = hi = ratings
        se = np.zeros(m)
        interval = "none"
    return RatingResult(
        models=battles.models,
        ratings=ratings,
        ci_low=lo,
        ci_high=hi,
        se=se,
        rank=ranks_from_ratings(ratings),
        rank_ub=conservative_rank(lo, hi),
        battles=played,
        method="elo",
        ties=ties,
        interval=interval,
        level=level,
        samples=samples,
        notes=tuple(notes),
    )


__all__ = ["online_elo", "elo_ratings", "elo_permutation_study"]
