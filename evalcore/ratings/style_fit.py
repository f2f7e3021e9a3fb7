"""The penalised logistic likelihood behind style control, and its Newton fit (internal).

``logit P(a beats b) = theta_a - theta_b + x . beta`` over n battles. Everything that involves ``theta``
goes through the battle's ordered pair ``a * m + b``: the logit differences are one gather from an (m, m)
table, and the theta parts of the gradient and the Hessian come from per-pair sums (one ``bincount`` into
an m * m table each, which stays in cache), so an iteration makes a handful of passes over the n battles
whatever the number of models, in blocks of :data:`BLOCK` battles. The Newton loop keeps the linear predictor of its current point, so the
line search's likelihood and the next gradient share it.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from evalcore.ratings.bt import logistic_into

# Battles per block: per-block temporaries stay a few MB (reused by the allocator, in cache) instead of
# hundreds of MB per operation, whose fresh pages cost as much system time as the arithmetic at 10M.
BLOCK = 1 << 18
STEP_TOL = 1e-9  # Newton stops once the next step would move no parameter by this (logit scale)


class StyleProblem:
    """Per-battle arrays for the penalised logistic likelihood.

    Parameters
    ----------
    a, b : ndarray of int, shape (n,)
    y : ndarray, shape (n,)
        Target per battle (1, 0, or 0.5 for a tie).
    w : ndarray, shape (n,)
        Battle weights (0 for battles the ties policy drops).
    x : ndarray, shape (n, F)
        Standardised covariates.
    m : int
    prior, penalty : float
        L2 penalties on theta and on beta.
    """

    def __init__(self, a, b, y, w, x, m, prior, penalty):
        # Column-major covariates: the Hessian works one feature column at a time.
        self.y, self.w, self.x = y, w, np.asfortranarray(x)
        self.n, self.m, self.f = y.shape[0], m, x.shape[1]
        self.prior, self.penalty = prior, penalty
        self.pair = a.astype(np.int64) * m + b

    def _blocks(self):
        return (slice(s, min(s + BLOCK, self.n)) for s in range(0, self.n, BLOCK))

    def _incidence_sum(self, table: np.ndarray) -> np.ndarray:
        """Per-ordered-pair sums, flat (m * m,), to ``sum_k v_k (e_a - e_b)``, shape (m,)."""
        t = table.reshape(self.m, self.m)
        return t.sum(axis=1) - t.sum(axis=0)

    def eta(self, params: np.ndarray) -> np.ndarray:
        """Linear predictor per battle, shape (n,)."""
        theta, beta = params[: self.m], params[self.m :]
        table = (theta[:, None] - theta[None, :]).ravel()
        out = np.empty(self.n)
        for sl in self._blocks():
            np.take(table, self.pair[sl], out=out[sl])
            out[sl] += self.x[sl] @ beta
        return out

    def loglik(self, params, w, eta=None) -> float:
        eta = self.eta(params) if eta is None else eta
        theta, beta = params[: self.m], params[self.m :]
        ll = 0.0
        for sl in self._blocks():
            # y log p + (1 - y) log(1 - p) = y * eta - softplus(eta), with the stable
            # softplus(eta) = max(eta, 0) + log1p(exp(-|eta|)) (4x faster than np.logaddexp(0, eta)).
            e = eta[sl]
            soft = np.abs(e)
            np.negative(soft, out=soft)
            np.exp(soft, out=soft)
            np.log1p(soft, out=soft)
            soft += np.maximum(e, 0.0)
            ll += float(w[sl] @ (self.y[sl] * e - soft))
        return float(ll - 0.5 * self.prior * theta @ theta - 0.5 * self.penalty * beta @ beta)

    def grad_and_p(self, params, w, eta=None):
        theta, beta = params[: self.m], params[self.m :]
        eta = self.eta(params) if eta is None else eta
        p = np.empty(self.n)
        table = np.zeros(self.m * self.m)
        g_beta = -self.penalty * beta
        for sl in self._blocks():
            logistic_into(eta[sl], p[sl])
            r = w[sl] * (self.y[sl] - p[sl])
            table += np.bincount(self.pair[sl], r, minlength=table.size)
            g_beta = g_beta + self.x[sl].T @ r
        g_theta = self._incidence_sum(table) - self.prior * theta
        return np.concatenate([g_theta, g_beta]), p

    def curvature(self, v, *, penalised=True):
        """``sum_k v_k z_k z_k^T`` with ``z_k = (e_a - e_b, x_k)``, shape (m + F, m + F).

        ``v`` is an array of shape (n,), or a callable giving its values on a slice of the battles (so
        that no (n,) temporary is needed).
        """
        m, f = self.m, self.f
        v_of = v if callable(v) else v.__getitem__
        tables = np.zeros((1 + f, m * m))
        h = np.zeros((m + f, m + f))
        for sl in self._blocks():
            vb = v_of(sl)
            pair = self.pair[sl]
            tables[0] += np.bincount(pair, vb, minlength=m * m)
            xb = self.x[sl]
            for k in range(f):
                col = vb * xb[:, k]  # contiguous when x is column-major (see __init__)
                tables[1 + k] += np.bincount(pair, col, minlength=m * m)
                h[m:, m + k] += xb.T @ col
        per_pair = tables[0].reshape(m, m)
        sym = per_pair + per_pair.T
        h[:m, :m] = -sym
        h[np.arange(m), np.arange(m)] = sym.sum(axis=1)
        cross = np.stack([self._incidence_sum(tables[1 + k]) for k in range(f)], axis=1)
        h[:m, m:] = cross
        h[m:, :m] = cross.T
        if penalised:
            h[np.arange(m), np.arange(m)] += self.prior
            h[np.arange(m, m + f), np.arange(m, m + f)] += self.penalty
        return h

    def fisher(self, w, p):
        """The curvature's per-battle weights ``w p (1 - p)``, as a callable on slices."""
        return lambda sl: w[sl] * p[sl] * (1.0 - p[sl])

    def newton(self, w, params0, tol=1e-8, max_iter=50):
        """Newton's method with a backtracking line search from ``params0``.

        Stops when the gradient norm is below ``tol`` or when the step the last curvature gives for the
        current gradient moves no parameter by :data:`STEP_TOL` (the curvature barely changes that close to
        the optimum; at 10M battles this spares the last curvature pass, whose step would be ~1e-12).

        Returns
        -------
        params : ndarray, shape (m + F,)
        iterations : int
        gradient, p : ndarray, shapes (m + F,) and (n,)
            The gradient and the fitted probabilities at ``params``.
        """
        m = self.m
        params = params0.copy()
        eta = self.eta(params)
        ll = self.loglik(params, w, eta)
        it = 0
        factor = None
        for it in range(1, max_iter + 1):  # noqa: B007
            g, p = self.grad_and_p(params, w, eta)
            if np.linalg.norm(g) < tol:
                return params, it, g, p
            if factor is not None and np.max(np.abs(linalg.cho_solve(factor, g))) < STEP_TOL:
                return params, it, g, p
            h = self.curvature(self.fisher(w, p))
            shift = np.zeros_like(h)
            shift[:m, :m] = max(float(np.mean(np.diag(h)[:m])), 1e-12) / m
            factor = linalg.cho_factor(h + shift)
            step = linalg.cho_solve(factor, g)
            t = 1.0
            while True:
                cand = params + t * step
                cand[:m] -= cand[:m].mean()
                eta_cand = self.eta(cand)
                new = self.loglik(cand, w, eta_cand)
                if new >= ll - 1e-12 * abs(ll) or t < 1e-10:
                    break
                t *= 0.5
            if np.max(np.abs(cand - params)) < 1e-15:
                break
            params, ll, eta = cand, new, eta_cand
        g, p = self.grad_and_p(params, w, eta)
        return params, it, g, p
