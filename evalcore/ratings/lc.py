"""Length-controlled win rate against a baseline (AlpacaEval 2.0 style).

For each model, a logistic GLM predicts the judge's preference for the model's answer over the baseline's
on instruction i:

    P_i = sigmoid(theta_m + beta_m * tanh(delta_len_i / sd(delta_len)) + gamma_m * difficulty_i)

with ``delta_len = len(baseline) - len(model)`` and ``sd`` over that model's annotations. Preferences
come in [1, 2] (2: the model's answer preferred; 0 means a draw, read as 1.5) and are used as fractional
targets ``preference - 1``. The length-controlled win rate is the mean prediction with the length term set
to zero, ``mean_i sigmoid(theta_m + gamma_m * difficulty_i)``, in percent. Its standard error is the delta
influence-function (delta-method) error over instructions: each instruction's own prediction plus its
pull on the fitted coefficients. Its interval (``delta-mid-p``, :func:`lc_estimate`) is the mid-p interval
at the effective size that error implies, ``p (1 - p) / se^2``, at most twice the pairs: it stays inside
[0, 100], is lopsided near the ends, and does not collapse when the GLM fits a few pairs perfectly.

The raw win rate (the mean preference) and the discrete one (wins plus half the draws) are means of
values bounded in [0, 1]: their intervals are mid-p at the effective size
(:func:`evalcore.stats.estimates.bounded_mean`; exact mid-p where every preference is 0 or 1).

AlpacaEval fits its difficulty term once across many models and regularises each fit towards "gamed"
versions of the baseline; we accept a difficulty file when the user has one, and otherwise estimate it
from the models at hand: a joint GLM ``sigmoid(theta_m + beta_m * tanh(...) + d_i)`` over all non-baseline
models with an L2 penalty on ``d``, leaving out the model being scored so its own votes do not leak into
its difficulty covariate.

The annotations and the files they come from (:class:`~evalcore.ratings.lc_annotations.LCAnnotations`, the
CSV readers): :mod:`evalcore.ratings.lc_annotations`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.special import expit

from evalcore.ratings.lc_annotations import LCAnnotations
from evalcore.stats.estimates import DEFF_FLOOR, LEVEL, Estimate, bounded_mean, interval_se, midp_bounds

LC_INTERVAL = "delta-mid-p"  # mid-p at the effective size the delta-method error implies


@dataclass(frozen=True)
class LengthControlledResult:
    """Raw, discrete and length-controlled win rates against the baseline, in percent, shape (p,).

    Attributes
    ----------
    models : tuple of str, shape (p,)
    baseline : str
    win_rate, standard_error : ndarray, shape (p,)
        Mean of ``preference - 1`` (x100) and its standard error of the mean.
    discrete_win_rate : ndarray, shape (p,)
        ``(wins + draws / 2) / n`` (x100), a win being a preference above 1.5.
    lc_win_rate, lc_standard_error : ndarray, shape (p,)
        The LC win rate and its delta-method standard error (percent).
    win_rate_ci_low, win_rate_ci_high, discrete_ci_low, discrete_ci_high, lc_ci_low, lc_ci_high : ndarray, shape (p,)
        95% intervals (percent): mid-p at the effective size for the raw and discrete win rates (NaN for a
        model with one annotation), ``delta-mid-p`` for the LC win rate (the baseline's is [50, 50]).
    n : ndarray of int, shape (p,)
    length_coef, difficulty_coef, intercept : ndarray, shape (p,)
        The per-model GLM (logit scale); zero for the baseline itself.
    difficulty_source : str
        ``"file"`` or ``"estimated"``.
    """

    models: tuple[str, ...]
    baseline: str
    win_rate: np.ndarray
    standard_error: np.ndarray
    discrete_win_rate: np.ndarray
    lc_win_rate: np.ndarray
    lc_standard_error: np.ndarray
    n: np.ndarray
    length_coef: np.ndarray
    difficulty_coef: np.ndarray
    intercept: np.ndarray
    difficulty_source: str
    win_rate_ci_low: np.ndarray
    win_rate_ci_high: np.ndarray
    discrete_ci_low: np.ndarray
    discrete_ci_high: np.ndarray
    lc_ci_low: np.ndarray
    lc_ci_high: np.ndarray

    def to_rows(self) -> list[dict]:
        """One dict per model, best LC win rate first, with the ``lc`` command's columns: each rate with its
        95% interval (None where there is none), and ``lc_standard_error`` the LC interval's own
        (:func:`~evalcore.stats.estimates.interval_se`: None where the interval is lopsided), so that it never
        disagrees with the interval printed beside it."""
        order = np.lexsort((np.asarray(self.models, dtype=object), -self.lc_win_rate))

        def num(x):
            return float(x) if np.isfinite(x) else None

        return [
            {
                "model": self.models[k],
                "win_rate": float(self.win_rate[k]),
                "win_rate_ci_low": num(self.win_rate_ci_low[k]),
                "win_rate_ci_high": num(self.win_rate_ci_high[k]),
                "discrete_win_rate": float(self.discrete_win_rate[k]),
                "discrete_ci_low": num(self.discrete_ci_low[k]),
                "discrete_ci_high": num(self.discrete_ci_high[k]),
                "lc_win_rate": float(self.lc_win_rate[k]),
                "lc_ci_low": num(self.lc_ci_low[k]),
                "lc_ci_high": num(self.lc_ci_high[k]),
                "lc_standard_error": interval_se(
                    float(self.lc_win_rate[k]), num(self.lc_ci_low[k]), num(self.lc_ci_high[k])
                ),
                "n": int(self.n[k]),
            }
            for k in order
        ]


def win_rate_estimate(preferences, *, level: float = LEVEL) -> Estimate:
    """The raw win rate (percent) of preferences in [0, 1] (1: the model's answer preferred), with the mid-p
    interval at its effective size; no interval for one preference."""
    return bounded_mean(preferences, level=level).scaled(100)


def discrete_win_rate_estimate(preferences, *, level: float = LEVEL) -> Estimate:
    """The discrete win rate (percent): a preference above 0.5 a win (1), exactly 0.5 a draw (0.5), else a
    loss (0), averaged, with the mid-p interval at its effective size (exact mid-p without draws)."""
    y = np.asarray(preferences, dtype=np.float64)
    return bounded_mean(np.where(y > 0.5, 1.0, np.where(y == 0.5, 0.5, 0.0)), level=level).scaled(100)


def lc_estimate(lc_win_rate: float, lc_standard_error: float, n: int, *, level: float = LEVEL) -> Estimate:
    """The LC win rate (percent) with its ``delta-mid-p`` interval: the mid-p interval at the effective size
    the delta-method error implies, ``p (1 - p) / se^2`` (``p``, ``se`` as fractions), at most ``2 n``.

    Like every bounded mean's (:func:`evalcore.stats.estimates.bounded_mean`), the interval stays inside
    [0, 100] and never claims more than twice the ``n`` pairs' information: on a handful of pairs the GLM
    can fit perfectly and its delta-method error collapse to ~0 (0 wins of 4 gave LC 0.02% [0.009, 0.05]
    on the logit scale); here the same run gets [0, 31]. No interval where the error is not finite.
    """
    p, se = float(lc_win_rate) / 100, float(lc_standard_error) / 100
    value = float(lc_win_rate)
    if not (np.isfinite(se) and se >= 0 and 0.0 <= p <= 1.0 and n >= 1):
        return Estimate(value, None, None, int(n), LC_INTERVAL, level)
    cap = float(n) / DEFF_FLOOR
    effective = cap if se == 0 else min(cap, max(p * (1 - p) / (se * se), 1e-9))
    low, high = midp_bounds(p * effective, effective, level)
    return Estimate(value, min(100 * low, value), max(100 * high, value), int(n), LC_INTERVAL, level, effective)


def _length_feature(ann: LCAnnotations) -> np.ndarray:
    """``tanh(delta_len / sd(delta_len))`` with the sd per model (ddof=1), shape (N,)."""
    delta = ann.len_baseline - ann.len_model
    out = np.zeros_like(delta)
    for m in range(len(ann.models)):
        rows = ann.model == m
        sd = delta[rows].std(ddof=1) if rows.sum() > 1 else 0.0
        out[rows] = np.tanh(delta[rows] / sd) if sd > 0 else 0.0
    return out


def _logistic_newton(x, y, *, ridge, tol=1e-10, max_iter=100):
    """Fractional-target logistic regression, ``x`` (N, d), ``ridge`` (d,) L2 weights. Returns (w, p, H)."""
    w = np.zeros(x.shape[1])
    for _ in range(max_iter):
        p = expit(x @ w)
        g = x.T @ (y - p) - ridge * w
        h = (x * (p * (1 - p))[:, None]).T @ x + np.diag(ridge)
        step = linalg.solve(h, g, assume_a="pos")
        w = w + step
        if np.linalg.norm(g) < tol or np.max(np.abs(step)) < 1e-12:
            break
    p = expit(x @ w)
    h = (x * (p * (1 - p))[:, None]).T @ x + np.diag(ridge)
    return w, p, h


def estimate_difficulty(
    ann: LCAnnotations, *, include: np.ndarray, length: np.ndarray, penalty: float = 1.0, tol: float = 1e-8
) -> np.ndarray:
    """Instruction difficulty from a joint GLM over the models flagged in ``include`` (bool, shape (p,)).

    ``sigmoid(theta_m + beta_m * length_feature + d_i)`` with ``penalty / 2 * |d|^2``; returns ``d``
    (shape (q,), mean-centred; higher means the models do better against the baseline on it).
    """
    rows = include[ann.model]
    mi = ann.model[rows]
    ii = ann.instruction[rows]
    y = ann.preference[rows] - 1.0
    t = length[rows]
    used, m_loc = np.unique(mi, return_inverse=True)
    p_count, q = used.size, len(ann.instructions)
    theta, beta, d = np.zeros(p_count), np.zeros(p_count), np.zeros(q)
    for _ in range(200):
        eta = theta[m_loc] + beta[m_loc] * t + d[ii]
        pr = expit(eta)
        r = y - pr
        v = pr * (1 - pr)
        g = np.concatenate(
            [
                np.bincount(m_loc, r, p_count),
                np.bincount(m_loc, r * t, p_count),
                np.bincount(ii, r, q) - penalty * d,
            ]
        )
        if np.linalg.norm(g) < tol:
            break
        # Hessian blocks: models (2p x 2p, block-diagonal by model), instructions (diagonal), cross terms.
        h_tt = np.bincount(m_loc, v, p_count)
        h_tb = np.bincount(m_loc, v * t, p_count)
        h_bb = np.bincount(m_loc, v * t * t, p_count)
        h_dd = np.bincount(ii, v, q) + penalty
        cell = m_loc * q + ii
        cross_t = np.bincount(cell, v, p_count * q).reshape(p_count, q)
        cross_b = np.bincount(cell, v * t, p_count * q).reshape(p_count, q)
        # Eliminate the diagonal instruction block (Schur complement): a 2p x 2p solve per step.
        a = np.zeros((2 * p_count, 2 * p_count))
        ar = np.arange(p_count)
        a[ar, ar] = h_tt
        a[ar, ar + p_count] = h_tb
        a[ar + p_count, ar] = h_tb
        a[ar + p_count, ar + p_count] = h_bb
        b = np.vstack([cross_t, cross_b])  # (2p, q)
        g_m, g_d = g[: 2 * p_count], g[2 * p_count :]
        schur = a - (b / h_dd) @ b.T
        step_m = linalg.solve(schur + 1e-12 * np.eye(2 * p_count), g_m - b @ (g_d / h_dd), assume_a="pos")
        step = np.concatenate([step_m, (g_d - b.T @ step_m) / h_dd])
        theta += step[:p_count]
        beta += step[p_count : 2 * p_count]
        d += step[2 * p_count :]
        if np.max(np.abs(step)) < 1e-12:
            break
    return d - d.mean()


def _difficulty_array(ann: LCAnnotations, difficulty: dict[str, float]) -> np.ndarray:
    """The given difficulty per instruction of ``ann``, shape (q,); every instruction must have one."""
    missing = [s for s in ann.instructions if s not in difficulty]
    if missing:
        raise ValueError(f"difficulty has no value for instruction {missing[0]!r} ({len(missing)} missing)")
    return np.array([difficulty[s] for s in ann.instructions], dtype=np.float64)


def _lc_fit(x: np.ndarray, y: np.ndarray, ridge: float) -> tuple[float, float, np.ndarray]:
    """One model's GLM on (intercept, length, difficulty) columns ``x``: LC win rate, its SE, coefficients."""
    w, p, h = _logistic_newton(x, y, ridge=np.full(3, ridge))
    x0 = x.copy()
    x0[:, 1] = 0.0
    pred = expit(x0 @ w)
    # Influence function of mean_i pred_i(w_hat): the instruction's own term plus its pull on w_hat
    # through the GLM's estimating equations; SE = sqrt(sum psi_i^2) / n (resampling instructions).
    grad = (x0 * (pred * (1 - pred))[:, None]).sum(axis=0)
    pull = (x * (y - p)[:, None]) @ np.linalg.solve(h, grad)
    psi = pred - pred.mean() + pull
    return 100 * pred.mean(), 100 * np.sqrt(np.sum(psi**2)) / x.shape[0], w


def length_controlled_win_rate(
    ann: LCAnnotations,
    *,
    baseline: str,
    difficulty: dict[str, float] | None = None,
    difficulty_penalty: float = 1.0,
    ridge: float = 1e-4,
) -> LengthControlledResult:
    """Raw, discrete and length-controlled win rates of every model against ``baseline``.

    Parameters
    ----------
    ann : LCAnnotations
    baseline : str
        The model whose answers are ``output_1``; its own rows (if any) get 50% by construction.
    difficulty : dict instruction_id -> float, optional
        A per-instruction difficulty (e.g. AlpacaEval's ``instruction_difficulty.csv``); estimated from
        the models at hand when omitted (leave-one-model-out, see module docs).
    difficulty_penalty : float
        L2 penalty on the estimated difficulty (logit scale).
    ridge : float
        Tiny L2 penalty on the GLM coefficients, so a model that always wins or always loses stays finite.
    """
    if ann.declared_baselines and baseline not in ann.declared_baselines:
        raise ValueError(
            f"baseline {baseline!r} is not the annotations' output_1 generator "
            f"({', '.join(ann.declared_baselines)})"
        )
    p_count = len(ann.models)
    length = _length_feature(ann)
    is_base = np.array([m == baseline for m in ann.models])
    if difficulty is not None:
        d_fixed = _difficulty_array(ann, difficulty)
        source = "file"
    else:
        d_fixed = None
        source = "estimated"
        if (~is_base).sum() < 2:
            raise ValueError(
                "estimating instruction difficulty needs at least two models besides the baseline"
            )
    keys = ("wr", "se", "dwr", "lc", "lcse", "b", "g", "t", "wr_lo", "wr_hi", "dwr_lo", "dwr_hi", "lc_lo", "lc_hi")
    out = {key: np.zeros(p_count) for key in keys}
    n = np.zeros(p_count, dtype=np.int64)
    for m in range(p_count):
        rows = ann.model == m
        y = ann.preference[rows] - 1.0
        n[m] = rows.sum()
        out["wr"][m] = 100 * y.mean()
        out["se"][m] = 100 * y.std(ddof=1) / np.sqrt(n[m]) if n[m] > 1 else np.nan
        wins, draws = (y > 0.5).sum(), (y == 0.5).sum()
        out["dwr"][m] = 100 * (wins + draws / 2) / n[m]
        for key, est in (("wr", win_rate_estimate(y)), ("dwr", discrete_win_rate_estimate(y))):
            out[f"{key}_lo"][m] = np.nan if est.ci_low is None else est.ci_low
            out[f"{key}_hi"][m] = np.nan if est.ci_high is None else est.ci_high
        if is_base[m]:
            out["lc"][m] = out["lc_lo"][m] = out["lc_hi"][m] = 50.0
            continue
        if d_fixed is None:
            include = ~is_base
            include[m] = False
            d_all = estimate_difficulty(ann, include=include, length=length, penalty=difficulty_penalty)
        else:
            d_all = d_fixed
        d = d_all[ann.instruction[rows]]
        x = np.column_stack([np.ones(n[m]), length[rows], d])
        out["lc"][m], out["lcse"][m], w = _lc_fit(x, y, ridge)
        out["t"][m], out["b"][m], out["g"][m] = w
        lc = lc_estimate(out["lc"][m], out["lcse"][m], int(n[m]))
        out["lc_lo"][m] = np.nan if lc.ci_low is None else lc.ci_low
        out["lc_hi"][m] = np.nan if lc.ci_high is None else lc.ci_high
    return LengthControlledResult(
        models=ann.models,
        baseline=baseline,
        win_rate=out["wr"],
        standard_error=out["se"],
        discrete_win_rate=out["dwr"],
        lc_win_rate=out["lc"],
        lc_standard_error=out["lcse"],
        n=n,
        length_coef=out["b"],
        difficulty_coef=out["g"],
        intercept=out["t"],
        difficulty_source=source,
        win_rate_ci_low=out["wr_lo"],
        win_rate_ci_high=out["wr_hi"],
        discrete_ci_low=out["dwr_lo"],
        discrete_ci_high=out["dwr_hi"],
        lc_ci_low=out["lc_lo"],
        lc_ci_high=out["lc_hi"],
    )
