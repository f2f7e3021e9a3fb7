"""Aggregated pair counts: all a Bradley-Terry fit needs, and what its bootstrap resamples.

One row per unordered pair ``i < j`` with the number of wins of each side, ties and both-bad ties. The
ties policy turns those into fractional win weights:

- ``half`` (default, as LMArena): a tie and a both-bad tie each count as half a win for each side;
- ``drop``: ties of both kinds are ignored;
- ``drop-bothbad``: both-bad ties are ignored, ordinary ties count half.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalcore.ratings.battles import A_WINS, B_WINS, BOTHBAD, TIE, Battles

TIES_POLICIES = ("half", "drop", "drop-bothbad")


@dataclass(frozen=True)
class PairCounts:
    """Battle outcomes aggregated per unordered pair.

    Attributes
    ----------
    models : tuple of str, shape (m,)
    i, j : ndarray of int32, shape (k,)
        The pair's model indices, ``i < j``; each pair appears once.
    wins_i, wins_j, ties, bothbad : ndarray of float64, shape (k,)
        Counts (float so that weighted votes and bootstrap resamples fit the same type).
    """

    models: tuple[str, ...]
    i: np.ndarray
    j: np.ndarray
    wins_i: np.ndarray
    wins_j: np.ndarray
    ties: np.ndarray
    bothbad: np.ndarray

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_pairs(self) -> int:
        return int(self.i.shape[0])

    @property
    def total(self) -> np.ndarray:
        """Battles per pair, all outcomes, shape (k,)."""
        return self.wins_i + self.wins_j + self.ties + self.bothbad

    def cells(self) -> np.ndarray:
        """Counts as a (k, 4) array: wins_i, wins_j, ties, bothbad (the bootstrap's multinomial cells)."""
        return np.stack([self.wins_i, self.wins_j, self.ties, self.bothbad], axis=1)

    def battles_per_model(self) -> np.ndarray:
        """Battles each model took part in, shape (m,)."""
        m = self.n_models
        tot = self.total
        return np.bincount(self.i, tot, minlength=m) + np.bincount(self.j, tot, minlength=m)


def check_ties_policy(ties: str) -> None:
    if ties not in TIES_POLICIES:
        raise ValueError(f"unknown ties policy {ties!r}; expected one of {', '.join(TIES_POLICIES)}")


def win_weights(cells: np.ndarray, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Effective wins of each side under a ties policy.

    Parameters
    ----------
    cells : ndarray, shape (..., k, 4)
        wins_i, wins_j, ties, bothbad per pair (optionally with leading bootstrap axes).
    ties : {"half", "drop", "drop-bothbad"}

    Returns
    -------
    w_ij, w_ji : ndarray, shape (..., k)
        Weighted wins of i over j and of j over i.
    """
    check_ties_policy(ties)
    w_ij = cells[..., 0].astype(np.float64, copy=True)
    w_ji = cells[..., 1].astype(np.float64, copy=True)
    if ties == "half":
        half = 0.5 * (cells[..., 2] + cells[..., 3])
    elif ties == "drop-bothbad":
        half = 0.5 * cells[..., 2]
    else:
        return w_ij, w_ji
    w_ij += half
    w_ji += half
    return w_ij, w_ji


AGGREGATE_BLOCK = 1 << 18  # battles per block in :func:`aggregate`


def _pair_cells(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Per battle: its (pair, cell) key ``pair * 4 + cell`` and its pair ``lo * m + hi``, where the cell
    is the outcome from the lower index's point of view (a win of "a" is a win of i unless swapped)."""
    a = a.astype(np.int64)
    b = b.astype(np.int64)
    lo = np.minimum(a, b)
    pair = lo * m + (a + b - lo)
    cell = outcome.astype(np.int64)
    flip = (a > b) & (cell < TIE)
    cell[flip] = 1 - cell[flip]
    return pair * 4 + cell, pair


def aggregate(battles: Battles, *, weights: np.ndarray | None = None) -> PairCounts:
    """Aggregate battles into per-pair counts.

    Parameters
    ----------
    battles : Battles, n battles
    weights : ndarray, shape (n,), optional
        Per-battle weights (e.g. bootstrap multiplicities); default one per battle.

    Returns
    -------
    PairCounts
        Only pairs that met at least once; ``i < j`` with counts oriented accordingly.
    """
    m = battles.n_models
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    if m * m * 4 <= 1 << 23:
        # Dense (pair, cell) table, filled a block of battles at a time: the per-battle temporaries stay
        # in cache (at 10M battles, 3x faster than whole-array passes over fresh 80 MB arrays).
        flat = np.zeros(m * m * 4, dtype=np.int64 if w is None else np.float64)
        for start in range(0, len(battles), AGGREGATE_BLOCK):
            part = slice(start, start + AGGREGATE_BLOCK)
            key, _ = _pair_cells(battles.model_a[part], battles.model_b[part], battles.outcome[part], m)
            flat += np.bincount(key, weights=None if w is None else w[part], minlength=flat.size)
        flat = flat.reshape(m * m, 4)
        present = np.flatnonzero(flat.sum(axis=1) > 0)
        cells = flat[present]
    else:  # many models: a dense m*m table would be too large, sort the pair keys instead
        key, pair = _pair_cells(battles.model_a, battles.model_b, battles.outcome, m)
        present, inv = np.unique(pair, return_inverse=True)
        cells = np.bincount(inv * 4 + key % 4, weights=w, minlength=present.size * 4).reshape(-1, 4)
    return PairCounts(
        models=battles.models,
        i=(present // m).astype(np.int32),
        j=(present % m).astype(np.int32),
        wins_i=cells[:, A_WINS].astype(np.float64),
        wins_j=cells[:, B_WINS].astype(np.float64),
        ties=cells[:, TIE].astype(np.float64),
        bothbad=cells[:, BOTHBAD].astype(np.float64),
    )


def pair_counts_from_arrays(
    models: tuple[str, ...] | list[str],
    i: np.ndarray,
    j: np.ndarray,
    wins_i: np.ndarray,
    wins_j: np.ndarray,
    ties: np.ndarray | None = None,
    bothbad: np.ndarray | None = None,
) -> PairCounts:
    """Build validated :class:`PairCounts` from per-row arrays; repeated or reversed pairs are merged.

    Parameters
    ----------
    models : sequence of str, shape (m,)
    i, j : array_like of int, shape (r,)
    wins_i, wins_j, ties, bothbad : array_like of float, shape (r,); ties/bothbad default to zero
    """
    m = len(models)
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    r = i.shape[0]
    cols = [
        np.asarray(c if c is not None else np.zeros(r), dtype=np.float64)
        for c in (wins_i, wins_j, ties, bothbad)
    ]
    for name, col in zip(("wins_i", "wins_j", "ties", "bothbad"), cols):
        bad = np.flatnonzero(~np.isfinite(col) | (col < 0))
        if bad.size:
            raise ValueError(f"row {bad[0] + 1}, column {name!r}: counts must be finite and non-negative")
    same = np.flatnonzero(i == j)
    if same.size:
        raise ValueError(
            f"row {same[0] + 1}, columns 'model_i'/'model_j': model {models[i[same[0]]]!r} plays itself"
        )
    swap = i > j
    wi = np.where(swap, cols[1], cols[0])
    wj = np.where(swap, cols[0], cols[1])
    lo = np.minimum(i, j)
    hi = np.maximum(i, j)
    key = lo * m + hi
    uniq, inv = np.unique(key, return_inverse=True)
    k = uniq.shape[0]
    merged = [np.bincount(inv, c, minlength=k) for c in (wi, wj, cols[2], cols[3])]
    return PairCounts(tuple(models), (uniq // m).astype(np.int32), (uniq % m).astype(np.int32), *merged)
