"""Choosing the two models of a battle: weighted pair sampling.

A pair (i, j) is drawn with probability proportional to ``w_i * w_j`` over the allowed pairs: two
different models that are not of the same family. A model with fewer than ``new_model_votes`` votes
has its weight multiplied by ``boost`` so that its interval narrows quickly. Which model sits on the
left is a fair coin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Candidate:
    """A model that can battle: its key (primary key or name), weight, family and votes so far."""

    key: object
    weight: float
    family: str = ""
    votes: int = 0


def pair_weights(
    candidates: Sequence[Candidate], *, new_model_votes: int = 0, boost: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Allowed pairs and their unnormalised weights.

    Returns
    -------
    i, j : ndarray of int, shape (p,)
        Indices into ``candidates`` with ``i < j``.
    weight : ndarray of float, shape (p,)
        ``w_i * w_j`` after boosting new models; pairs of one family or with a zero weight are left out.
    """
    if boost <= 0:
        raise ValueError("boost must be positive")
    weights = np.array([c.weight for c in candidates], dtype=float)
    if np.any(~np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("model weights must be finite and not negative")
    votes = np.array([c.votes for c in candidates])
    weights = np.where(votes < new_model_votes, weights * boost, weights)
    n = len(candidates)
    i, j = np.triu_indices(n, k=1)
    families = [c.family for c in candidates]
    same_family = np.array([bool(families[a]) and families[a] == families[b] for a, b in zip(i, j)], dtype=bool)
    weight = weights[i] * weights[j]
    keep = (~same_family) & (weight > 0)
    return i[keep], j[keep], weight[keep]


def sample_pair(
    candidates: Sequence[Candidate],
    *,
    rng: np.random.Generator,
    new_model_votes: int = 0,
    boost: float = 1.0,
) -> tuple[Candidate, Candidate]:
    """Draw one battle: ``(left, right)``.

    Raises
    ------
    ValueError
        When no two models may meet (fewer than two models, or all of one family, or zero weights).
    """
    i, j, weight = pair_weights(candidates, new_model_votes=new_model_votes, boost=boost)
    if len(weight) == 0:
        raise ValueError("the arena needs at least two models of different families with positive weight")
    chosen = rng.choice(len(weight), p=weight / weight.sum())
    first, second = candidates[i[chosen]], candidates[j[chosen]]
    return (first, second) if rng.random() < 0.5 else (second, first)
