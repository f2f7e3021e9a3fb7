"""Poisson draws at a fixed set of means by table inversion (the bootstrap's resampling, internal).

The Poisson bootstrap draws, for every (pair, outcome) cell and every round, one Poisson count whose mean
is the cell's observed count: at 200 models about 60 million draws per category for 1,000 rounds, at a
few thousand distinct means. numpy's ``Generator.poisson`` spends 35-55 ns a draw (a rejection sampler
that evaluates log-gamma per draw) where a uniform costs ~3 ns. :class:`PoissonTable` builds once, per
distinct mean, the cumulative distribution over every value that is not astronomically unlikely, and a
guide table (Chen and Asau's indexed search: for each of ``GUIDE_BUCKETS * width`` equal slices of
[0, 1), the first value the slice can map to); a draw is then a uniform, a guide lookup and one exact
comparison with the CDF, with a short walk (~3% of draws) and a bisection for the rare uniform that lands
in a crowded tail slice.

Accuracy: a mean's table covers ``[lo, hi]`` with each tail outside it below 1e-20 (Chernoff and
Bernstein bounds; the top value takes that remainder), and its probabilities are built as ratios of
neighbours (``log(mean) - log(x)``, accumulated) normalised over the table, so each is right to ~1e-12
relative; the inversion compares the uniform with the stored CDF exactly. No statistic of a bootstrap can
tell this from an exact Poisson sampler; tests check the law (moments, point probabilities, chi-square).
"""

from __future__ import annotations

import numpy as np

# A table entry counts as below a guide bucket only when its CDF plus this slack is: far more than the
# rounding of ``buckets * (cdf + slack)`` and of ``buckets * u``, so a guide never points past its answer.
GUIDE_SLACK = 2.0**-26
MAX_GROUPS = 1 << 22
GUIDE_BUCKETS = 4  # guide entries per table entry: about 3% of draws walk a step past the guide
BLOCK = 1 << 17  # draws per block in :meth:`PoissonTable.draw` (its temporaries stay in cache)
WALK = 2  # steps walked past the guide before the rest (a uniform in a crowded tail slice) bisect


def support(means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest value of each mean's table: outside, each tail is below 1e-20."""
    lo = np.floor(means - np.sqrt(92.0 * means))  # P(X <= mean - x) <= exp(-x^2 / (2 mean))
    # P(X >= mean + x) <= exp(-x^2 / (2 (mean + x / 3))): x^2 - (92/3) x - 92 mean >= 0.
    hi = np.ceil(means + (92.0 / 3.0 + np.sqrt((92.0 / 3.0) ** 2 + 4 * 92.0 * means)) / 2.0) + 1.0
    hi = np.where(means > 0, hi, 0.0)  # a zero mean draws only 0
    return np.maximum(lo, 0.0).astype(np.int64), hi.astype(np.int64)


class PoissonTable:
    """Inversion sampler for independent Poisson draws with the means ``means`` (shape (n,), finite, >= 0).

    :meth:`draw` returns an (n, size) array of counts as float64: row r holds ``size`` independent draws
    of Poisson(``means[r]``). Building costs O(sum over distinct means of sqrt(mean)) once (~0.1 s for
    60,000 cells of a 10M-vote arena); a draw costs a uniform and a few vectorised passes.
    """

    def __init__(self, means: np.ndarray):
        means = np.asarray(means, dtype=np.float64)
        if means.ndim != 1:
            raise ValueError("means must be one-dimensional")
        if means.size and not (np.isfinite(means).all() and means.min() >= 0):
            raise ValueError("Poisson means must be finite and non-negative")
        values, group = np.unique(means, return_inverse=True)
        if values.size > MAX_GROUPS:
            raise ValueError(f"at most {MAX_GROUPS:,} distinct means")
        self.n = means.size
        lo, hi = support(values)
        width = hi - lo + 1
        offset = np.zeros(values.size + 1, dtype=np.int64)
        np.cumsum(width, out=offset[1:])
        starts, ends = offset[:-1], offset[1:] - 1
        owner = np.repeat(np.arange(values.size), width)  # the group of each table entry
        x = (np.arange(int(offset[-1])) - starts[owner] + lo[owner]).astype(np.float64)  # its value
        # log p(x) - log p(x - 1) = log(mean) - log(x), accumulated within each group from its lowest value
        # (the running sum over all groups stays small: each group's rises and falls back).
        step = np.zeros(x.size)
        has = (values > 0)[owner]
        step[has] = np.log(values[owner[has]]) - np.log(np.maximum(x[has], 1.0))
        step[starts] = 0.0
        logp = np.cumsum(step)
        logp -= np.repeat(logp[starts], width)
        logp -= np.repeat(np.maximum.reduceat(logp, starts), width)
        p = np.exp(logp)
        p /= np.repeat(np.add.reduceat(p, starts), width)
        cdf = np.cumsum(p)
        cdf -= np.repeat(cdf[starts] - p[starts], width)
        cdf[ends] = np.inf  # the top value takes the rest: every search stops inside its group
        # Guide: bucket j of B (uniforms u with floor(u * B) == j) starts at the first entry that some such u
        # can map to: entries with ceil(B * (cdf + slack)) <= j lie below every such u, however B * u rounds.
        buckets = GUIDE_BUCKETS * width
        boffset = np.zeros(values.size + 1, dtype=np.int64)
        np.cumsum(buckets, out=boffset[1:])
        first = np.ceil(buckets[owner] * (cdf + GUIDE_SLACK))  # inf for the top entries
        below = first < buckets[owner]
        passed = np.bincount(
            boffset[:-1][owner[below]] + first[below].astype(np.int64), minlength=int(boffset[-1])
        )
        passed = np.cumsum(passed)  # entries below each bucket, counted over all groups so far
        bowner = np.repeat(np.arange(values.size), buckets)
        before = np.zeros(values.size, dtype=np.int64)
        before[1:] = passed[boffset[1:-1] - 1]
        self._guide = passed - before[bowner] + starts[bowner]
        self._cdf = cdf
        self._buckets = buckets.astype(np.float64)[group]
        self._last = (buckets - 1)[group]
        self._boffset = boffset[:-1][group]
        self._end = ends[group]
        self._shift = (lo - starts)[group]  # value = table index + shift

    def cdf_table(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """The values of row ``row``'s table and their CDF (the top value's is ``inf``: it takes the rest)."""
        end = int(self._end[row])
        start = end - int(self._last[row]) // GUIDE_BUCKETS
        values = np.arange(start, end + 1) + int(self._shift[row])
        return values, self._cdf[start : end + 1].copy()

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` draws per mean, shape (n, size), float64 (uniforms consumed in row order)."""
        out = np.empty((self.n, size))
        rows = max(1, BLOCK // max(size, 1))
        u = np.empty((rows, size))
        scaled = np.empty((rows, size))
        bucket = np.empty((rows, size), dtype=np.int64)
        index = np.empty((rows, size), dtype=np.int64)
        for r0 in range(0, self.n, rows):
            r1 = min(r0 + rows, self.n)
            ub, sb, bb, ib = u[: r1 - r0], scaled[: r1 - r0], bucket[: r1 - r0], index[: r1 - r0]
            rng.random(out=ub)
            np.multiply(ub, self._buckets[r0:r1, None], out=sb)
            np.copyto(bb, sb, casting="unsafe")  # floor: both factors are non-negative
            np.minimum(bb, self._last[r0:r1, None], out=bb)
            bb += self._boffset[r0:r1, None]
            np.take(self._guide, bb, out=ib, mode="clip")  # "clip": no buffered copy (all in range)
            self._finish(ib.reshape(-1), ub.reshape(-1), r0, size)
            ib += self._shift[r0:r1, None]
            np.copyto(out[r0:r1], ib, casting="unsafe")
        return out

    def _finish(self, index: np.ndarray, u: np.ndarray, r0: int, size: int) -> None:
        """From each guide entry, the first entry whose CDF exceeds its uniform (in place)."""
        todo = np.flatnonzero(self._cdf[index] <= u)
        for _ in range(WALK):
            if not todo.size:
                return
            index[todo] += 1
            todo = todo[self._cdf[index[todo]] <= u[todo]]
        if not todo.size:
            return
        lo, hi, target = index[todo] + 1, self._end[r0 + todo // size], u[todo]  # answer in [lo, hi]
        while True:
            open_ = lo < hi
            if not open_.any():
                break
            mid = (lo + hi) // 2
            above = self._cdf[mid] > target
            hi = np.where(open_ & above, mid, hi)
            lo = np.where(open_ & ~above, mid + 1, lo)
        index[todo] = lo
