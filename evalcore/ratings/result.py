"""The rating result every method returns, the Elo scale, and rank summaries."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from evalcore.boundary.validation import check_level

# One logit unit in Elo points: a 400-point gap means 10:1 odds.
ELO_PER_LOGIT = 400.0 / math.log(10.0)
BASE_RATING = 1000.0


@dataclass(frozen=True)
class RatingResult:
    """Ratings of m models on the Elo scale, with intervals and ranks.

    Arrays are in the order of ``models`` (alphabetical, as the readers produce them); use
    :meth:`order` for a best-first permutation.

    Attributes
    ----------
    models : tuple of str, shape (m,)
    ratings : ndarray, shape (m,)
        Elo-scale ratings: ``BASE_RATING + ELO_PER_LOGIT * theta`` with ``theta`` mean-centred, or shifted
        so that the anchor model has its anchor rating.
    ci_low, ci_high : ndarray, shape (m,)
        Interval bounds (``level``); equal to ``ratings`` when no interval was computed
        (``interval == "none"``) and for the anchor model (its interval is zero by construction).
    se : ndarray, shape (m,)
        Sandwich (robust) standard errors on the Elo scale; for online Elo, the permutation spread.
    rank : ndarray of int, shape (m,)
        1 + the number of models with a strictly higher rating.
    rank_ub : ndarray of int, shape (m,)
        LMArena's conservative rank: 1 + the number of models whose ``ci_low`` exceeds this model's
        ``ci_high``.
    rank_ci_low, rank_ci_high : ndarray of int, shape (m,), or None
        Percentile interval of the rank over bootstrap rounds (best, worst).
    battles : ndarray, shape (m,)
        Battles each model took part in (all outcomes).
    method : str
        ``"bt"``, ``"elo"`` or ``"style"``.
    ties : str
        Ties policy used: ``half``, ``drop`` or ``drop-bothbad``.
    anchor : tuple (str, float) or None
    prior : float
        L2 penalty on theta (logit scale) used to make the fit finite; 0 when none.
    interval : str
        ``"bootstrap"``, ``"sandwich"``, ``"permutation"`` or ``"none"``.
    level : float
        Coverage of the interval (e.g. 0.95).
    bootstrap_rounds : int
        Rounds used for the interval (after dropping degenerate ones).
    samples : ndarray, shape (R, m), or None
        Bootstrap ratings (Elo scale, same anchoring as ``ratings``).
    iterations : int
        Solver iterations of the point fit.
    gradient_norm : float
        Norm of the log-likelihood gradient (logit scale) at the point fit.
    log_likelihood : float
    notes : tuple of str
        Plain-language remarks (anchor collapse, dropped rounds, prior used).
    provisional : ndarray of bool, shape (m,), or None
        Models too little known to rank (see :mod:`evalcore.ratings.provisional`); None when not assessed.
    provisional_min_battles : int or None
        The battle count below which a model was provisional.
    """

    models: tuple[str, ...]
    ratings: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    se: np.ndarray
    rank: np.ndarray
    rank_ub: np.ndarray
    battles: np.ndarray
    method: str = "bt"
    ties: str = "half"
    anchor: tuple[str, float] | None = None
    prior: float = 0.0
    interval: str = "none"
    level: float = 0.95
    bootstrap_rounds: int = 0
    rank_ci_low: np.ndarray | None = None
    rank_ci_high: np.ndarray | None = None
    samples: np.ndarray | None = field(default=None, repr=False)
    iterations: int = 0
    gradient_norm: float = 0.0
    log_likelihood: float = float("nan")
    notes: tuple[str, ...] = ()
    provisional: np.ndarray | None = None
    provisional_min_battles: int | None = None

    def order(self) -> np.ndarray:
        """Indices best first (rating descending, then name)."""
        return np.lexsort((np.asarray(self.models, dtype=object), -self.ratings))

    def rating_of(self, model: str) -> float:
        return float(self.ratings[self.models.index(model)])

    def to_rows(self) -> list[dict]:
        """One dict per model, best first, with the CLI's columns.

        Interval bounds of provisional models may be infinite (an open side: no loss, or no win).
        """
        rows = []
        for k in self.order():
            rows.append(
                {
                    "model": self.models[k],
                    "rating": float(self.ratings[k]),
                    "ci_low": float(self.ci_low[k]),
                    "ci_high": float(self.ci_high[k]),
                    "rank": int(self.rank[k]),
                    "rank_ub": int(self.rank_ub[k]),
                    "battles": int(self.battles[k]),
                    "provisional": bool(self.provisional[k]) if self.provisional is not None else False,
                }
            )
        return rows


def parse_anchor(anchor) -> tuple[str, float] | None:
    """Accept ``None``, ``("model", rating)`` or ``"MODEL=RATING"``."""
    if anchor is None:
        return None
    if isinstance(anchor, str):
        name, sep, value = anchor.rpartition("=")
        if not sep or not name:
            raise ValueError(f"anchor {anchor!r}: expected MODEL=RATING")
        try:
            rating = float(value)
        except ValueError:
            raise ValueError(f"anchor {anchor!r}: rating {value!r} is not a number") from None
    else:
        name, rating = str(anchor[0]), float(anchor[1])
    if not np.isfinite(rating):
        raise ValueError(f"anchor {name}: the rating must be a finite number, not {rating}")
    return name, rating


def to_elo_scale(theta: np.ndarray, models: tuple[str, ...], anchor: tuple[str, float] | None) -> np.ndarray:
    """Map logit-scale strengths, shape (..., m), to Elo-scale ratings.

    Without an anchor the ratings are mean-centred at ``BASE_RATING``; with one, each row is shifted so
    the anchor model has the anchor rating.
    """
    elo = ELO_PER_LOGIT * theta
    if anchor is None:
        return elo - elo.mean(axis=-1, keepdims=True) + BASE_RATING
    name, value = anchor
    if name not in models:
        raise ValueError(f"anchor model {name!r} is not among the rated models")
    a = models.index(name)
    return elo - elo[..., a : a + 1] + value


def ranks_from_ratings(ratings: np.ndarray) -> np.ndarray:
    """1 + number of strictly higher ratings, along the last axis; shape preserved."""
    r = np.asarray(ratings, dtype=np.float64)
    flat = r.reshape(-1, r.shape[-1])
    out = np.empty(flat.shape, dtype=np.int64)
    m = flat.shape[1]
    for row in range(flat.shape[0]):
        ordered = np.sort(flat[row])
        out[row] = 1 + m - np.searchsorted(ordered, flat[row], side="right")
    return out.reshape(r.shape)


def conservative_rank(ci_low: np.ndarray, ci_high: np.ndarray) -> np.ndarray:
    """LMArena's rank (UB): 1 + the number of models whose lower bound is above this upper bound."""
    return 1 + (ci_low[None, :] > ci_high[:, None]).sum(axis=1)


def percentile_interval(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0 of ``samples`` (R, m)."""
    check_level(level)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(samples, [alpha, 1.0 - alpha], axis=0)
    return lo, hi
