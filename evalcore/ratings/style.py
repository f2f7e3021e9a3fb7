"""Style control: Bradley-Terry with per-battle style covariates.

``logit P(a beats b) = theta_a - theta_b + x . beta`` where each covariate is a style difference between
the two answers, ``(s_a - s_b) / (s_a + s_b + 1)`` (answer length in tokens, markdown headers, list items,
bold spans), z-scored over the data. ``beta`` carries an L2 penalty (``penalty / 2 * |beta|^2``); ``theta``
is centred and reported on the Elo scale like plain BT. The style-controlled rating answers "what would the
rating be if both answers had the same style".

Fitted by Newton's method over the n battles (the theta block of the Hessian is aggregated per pair);
intervals by percentile bootstrap over battles (multinomial battle weights, warm-started Newton per round)
or, with ``rounds=0``, sandwich standard errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from evalcore.boundary.validation import check_integer, check_level, check_prior
from evalcore.ratings.battles import A_WINS, B_WINS, BOTHBAD, STYLE_FEATURES, TIE, Battles
from evalcore.ratings.bt import check_identifiable, elo_se, fit_notes, newton_fit
from evalcore.ratings.counts import PairCounts, aggregate, check_ties_policy, win_weights
from evalcore.ratings.result import (
    ELO_PER_LOGIT,
    RatingResult,
    conservative_rank,
    parse_anchor,
    percentile_interval,
    ranks_from_ratings,
    to_elo_scale,
)
from evalcore.ratings.spanning import TwoWayTree
from evalcore.ratings.style_fit import StyleProblem


@dataclass(frozen=True)
class StyleControlledResult:
    """Style-controlled ratings and the style coefficients.

    Attributes
    ----------
    ratings : RatingResult
        Style-controlled ratings (``method == "style"``), shapes (m,).
    features : tuple of str, shape (F,)
    coefficients : ndarray, shape (F,)
        Logit change per standard deviation of the normalised style difference (positive: voters
        prefer the answer with more of it).
    coef_ci_low, coef_ci_high, coef_se : ndarray, shape (F,)
    feature_mean, feature_std : ndarray, shape (F,)
        The z-scoring applied to ``(s_a - s_b) / (s_a + s_b + 1)``.
    penalty : float
        L2 penalty on the coefficients.
    """

    ratings: RatingResult
    features: tuple[str, ...]
    coefficients: np.ndarray
    coef_ci_low: np.ndarray
    coef_ci_high: np.ndarray
    coef_se: np.ndarray
    feature_mean: np.ndarray
    feature_std: np.ndarray
    penalty: float

    def coefficient_rows(self) -> list[dict]:
        """One dict per feature: ``coefficient, estimate, ci_low, ci_high, elo_per_sd``."""
        return [
            {
                "coefficient": name,
                "estimate": float(self.coefficients[f]),
                "ci_low": float(self.coef_ci_low[f]),
                "ci_high": float(self.coef_ci_high[f]),
                "elo_per_sd": float(ELO_PER_LOGIT * self.coefficients[f]),
            }
            for f, name in enumerate(self.features)
        ]


def style_differences(style_a: np.ndarray, style_b: np.ndarray) -> np.ndarray:
    """Normalised differences ``(a - b) / (a + b + 1)``, shape (n, F) column-major, from counts of shape
    (n, F)."""
    a = np.asarray(style_a, dtype=np.float64)
    b = np.asarray(style_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"style arrays must both have shape (n, F); got {a.shape} and {b.shape}")
    if a.size and not (  # min/max propagate NaN, and NaN >= 0 is False
        min(a.min(), b.min()) >= 0 and max(a.max(), b.max()) < np.inf
    ):
        raise ValueError("style counts must be finite and non-negative")
    out = np.empty(a.shape, order="F")  # column-major, as the style fit uses it
    for k in range(a.shape[1]):
        col = out[:, k]
        np.subtract(a[:, k], b[:, k], out=col)
        col /= a[:, k] + b[:, k] + 1.0
    return out


def _identifiable(battles: Battles, weights: np.ndarray) -> bool:
    counts = aggregate(battles, weights=weights)
    try:
        check_identifiable(battles.models, counts.i, counts.j, *win_weights(counts.cells(), "half"))
    except ValueError:
        return False
    return True


def fit_style_controlled(
    battles: Battles,
    *,
    features: np.ndarray | None = None,
    feature_names: tuple[str, ...] | None = None,
    ties: str = "half",
    anchor=None,
    prior: float | None = None,
    penalty: float = 1.0,
    rounds: int = 0,
    rng: np.random.Generator | None = None,
    seed: int | None = None,
    level: float = 0.95,
    progress: Callable[[int, int], None] | None = None,
    counts: PairCounts | None = None,
    start: tuple[dict[str, float], np.ndarray] | None = None,
) -> StyleControlledResult:
    """Style-controlled Bradley-Terry.

    Parameters
    ----------
    battles : Battles, n battles
        With ``style_a``/``style_b`` (shape (n, 4)) unless ``features`` is given.
    features : ndarray, shape (n, F), optional
        Raw per-battle covariates (already differences); z-scored here. Default: normalised
        differences of the battles' style counts.
    feature_names : tuple of str, shape (F,), optional
    ties, anchor, prior
        As in :func:`evalcore.ratings.fit_bradley_terry`.
    penalty : float
        L2 penalty on the style coefficients (on the summed log-likelihood).
    rounds : int
        Bootstrap rounds over battles; 0 gives sandwich intervals.
    rng, seed : numpy Generator or int
    counts : PairCounts, optional
        ``aggregate(battles)``, when the caller has made it (the arena's refit): under ``ties="half"`` the
        starting fit uses it instead of aggregating the battles again (1.5 s at 10M battles).
    level : float
    start : (dict of str to float, ndarray of shape (F,)), optional
        Where Newton's method starts: strengths by model name (logit scale; models not named start from
        plain BT on the pair counts) and the style coefficients, e.g. an earlier fit on nearly the same
        battles (the arena's next refit: one or two curvature passes over n instead of four). The fit
        converges to the same optimum (within its tolerance) from any start.

    Returns
    -------
    StyleControlledResult
    """
    check_ties_policy(ties)
    check_level(level)
    rounds = check_integer(rounds, "rounds", minimum=0)
    anchor = parse_anchor(anchor)
    if anchor is not None and anchor[0] not in battles.models:
        raise ValueError(f"anchor model {anchor[0]!r} is not among the rated models")
    x, feature_names, mean, std = _standardised_features(battles, features, feature_names)
    prior = check_prior(prior)
    y, w = _targets_and_weights(battles, ties)
    if counts is None or ties != "half":  # under "half" every battle weighs 1: the plain counts
        counts = aggregate(battles, weights=w)
    w_ij, w_ji = win_weights(counts.cells(), "half")
    if prior == 0.0:
        check_identifiable(battles.models, counts.i, counts.j, w_ij, w_ji)
    m = battles.n_models
    # Start from plain BT on the pair counts (the model with beta = 0): a few Newton steps fewer over n.
    params0 = _start(battles.models, x.shape[1], start, lambda: newton_fit(counts.i, counts.j, w_ij, w_ji, m, prior=prior).theta)  # fmt: skip
    problem = StyleProblem(battles.model_a, battles.model_b, y, w, x, m, prior, float(penalty))
    params, iterations, gradient, cov = _point_fit(problem, params0)
    theta, beta = params[:m], params[m:]
    ratings = to_elo_scale(theta, battles.models, anchor)
    se = elo_se(cov[:m, :m], battles.models, anchor)
    coef_se = np.sqrt(np.clip(np.diag(cov)[m:], 0, None))
    notes = list(fit_notes(anchor, prior))
    notes.append(
        f"style-controlled for {', '.join(feature_names)} (L2 penalty {penalty:g} on their coefficients)"
    )
    if rounds > 0:
        if rng is None:
            rng = np.random.default_rng(seed)
        draws, dropped = _bootstrap_draws(problem, battles, params, rounds, rng, progress)
        if dropped:
            notes.append(f"{dropped} of {rounds} bootstrap rounds had no finite MLE and were left out")
        intervals = _bootstrap_intervals(draws, battles, anchor, ratings, level)
    else:
        z = ndtri(0.5 + level / 2)
        lo, hi = ratings - z * se, ratings + z * se
        intervals = _Intervals(lo, hi, beta - z * coef_se, beta + z * coef_se, None, "sandwich", None, None)
    result = _rating_result(
        battles,
        ratings,
        se,
        intervals,
        ties=ties,
        anchor=anchor,
        prior=prior,
        level=level,
        iterations=iterations,
        gradient_norm=float(np.linalg.norm(gradient)),
        log_likelihood=problem.loglik(params, w),
        notes=tuple(notes),
    )
    return StyleControlledResult(
        result, feature_names, beta, intervals.c_lo, intervals.c_hi, coef_se, mean, std, float(penalty)
    )


def _start(models: tuple[str, ...], n_features: int, start, plain: Callable[[], np.ndarray]) -> np.ndarray:
    """Newton's starting parameters: plain BT on the pair counts (the model with beta = 0), or ``start``
    (strengths by name, coefficients), models it does not name taking plain BT's strengths."""
    if start is None:
        return np.concatenate([plain(), np.zeros(n_features)])
    try:
        by_name, beta = start
        beta = np.asarray(beta, dtype=np.float64)
        named = {str(k): float(v) for k, v in dict(by_name).items()}
    except (TypeError, ValueError) as exc:
        raise ValueError(f"start must be (strengths by model name, coefficients): {exc}") from None
    if beta.shape != (n_features,) or not np.all(np.isfinite(beta)):
        raise ValueError(f"start's coefficients must be {n_features} finite numbers; got shape {beta.shape}")
    if not all(np.isfinite(v) for v in named.values()):
        raise ValueError("start's strengths must be finite")
    theta = plain() if any(name not in named for name in models) else np.zeros(len(models))
    theta = np.array([named.get(name, theta[k]) for k, name in enumerate(models)])
    return np.concatenate([theta - theta.mean(), beta])


def _point_fit(problem: StyleProblem, start: np.ndarray) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """Full-data Newton fit from ``start``: parameters, iterations, gradient there, and the sandwich
    covariance."""
    w, y = problem.w, problem.y
    params, iterations, g, p = problem.newton(w, start)
    h = problem.curvature(problem.fisher(w, p))
    h_inv = np.linalg.pinv(h, hermitian=True)
    scores = problem.curvature(lambda sl: (w[sl] * (y[sl] - p[sl])) ** 2, penalised=False)
    cov = h_inv @ scores @ h_inv
    return params, iterations, g, cov


def _standardised_features(
    battles: Battles, features: np.ndarray | None, feature_names: tuple[str, ...] | None
) -> tuple[np.ndarray, tuple[str, ...], np.ndarray, np.ndarray]:
    """The z-scored (n, F) covariates, their names, and the mean and std used to z-score them."""
    if features is None:
        if battles.style_a is None or battles.style_b is None:
            raise ValueError(
                "style control needs style counts per battle: columns tokens_a, tokens_b, headers_a, headers_b, "
                "list_items_a, list_items_b, bold_a, bold_b (or FastChat conv_metadata)"
            )
        features = style_differences(battles.style_a, battles.style_b)
        feature_names = STYLE_FEATURES
        x = features  # a fresh array: standardised in place below
    else:
        x = np.array(features, dtype=np.float64, order="F")
    n = len(battles)
    if x.ndim != 2 or x.shape[0] != n:
        raise ValueError(f"features must have shape ({n}, F); got {x.shape}")
    feature_names = tuple(feature_names or (f"x{k}" for k in range(x.shape[1])))
    # Column means and variances by BLAS products (numpy's axis-0 reductions over (n, F) are slow).
    mean = np.ones(n) @ x / max(n, 1)
    x -= mean
    std = np.sqrt(np.einsum("ij,ij->j", x, x) / max(n, 1))
    std[std == 0] = 1.0
    x /= std
    return x, feature_names, mean, std


def _targets_and_weights(battles: Battles, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-battle target (1 a wins, 0 b wins, 0.5 tie) and weight (0 for ties dropped by ``ties``)."""
    out = battles.outcome
    y = np.where(out == A_WINS, 1.0, np.where(out == B_WINS, 0.0, 0.5))
    w = np.ones(len(battles))
    if ties == "drop":
        w[out >= TIE] = 0.0
    elif ties == "drop-bothbad":
        w[out == BOTHBAD] = 0.0
    return y, w


def _bootstrap_draws(
    problem: StyleProblem,
    battles: Battles,
    params: np.ndarray,
    rounds: int,
    rng: np.random.Generator,
    progress: Callable[[int, int], None] | None,
) -> tuple[np.ndarray, int]:
    """Refit on ``rounds`` multinomial resamples of the battles; returns the (R, m + F) fits and drops."""
    n = len(battles)
    draws = []
    dropped = 0
    tree = TwoWayTree(battles, problem.w) if problem.prior == 0.0 else None  # the exact check only where it fails
    for r in range(rounds):
        wr = problem.w * rng.multinomial(n, np.full(n, 1.0 / n))
        if tree is not None and not tree.holds(wr) and not _identifiable(battles, wr):
            dropped += 1  # a resample where some model never lost (or never won): no finite MLE
        else:
            draws.append(problem.newton(wr, params)[0])
        if progress is not None:
            progress(r + 1, rounds)
    if not draws:
        raise ValueError("every bootstrap round was degenerate (no finite MLE); pass a prior (--prior)")
    return np.asarray(draws), dropped


@dataclass(frozen=True)
class _Intervals:
    lo: np.ndarray
    hi: np.ndarray
    c_lo: np.ndarray
    c_hi: np.ndarray
    samples: np.ndarray | None
    kind: str
    rank_lo: np.ndarray | None
    rank_hi: np.ndarray | None


def _bootstrap_intervals(draws, battles: Battles, anchor, ratings: np.ndarray, level: float) -> _Intervals:
    """Percentile intervals for ratings, coefficients and ranks from the bootstrap fits."""
    m = battles.n_models
    samples = to_elo_scale(draws[:, :m], battles.models, anchor)
    lo, hi = percentile_interval(samples, level)
    c_lo, c_hi = percentile_interval(draws[:, m:], level)
    if anchor is not None:
        a = battles.models.index(anchor[0])
        lo[a] = hi[a] = ratings[a]
    rank_lo, rank_hi = percentile_interval(ranks_from_ratings(samples).astype(float), level)
    return _Intervals(
        lo, hi, c_lo, c_hi, samples, "bootstrap", np.floor(rank_lo).astype(int), np.ceil(rank_hi).astype(int)
    )


def _rating_result(battles: Battles, ratings, se, iv: _Intervals, **fit) -> RatingResult:
    """The style-controlled :class:`RatingResult`; ``fit`` holds its fit-level fields."""
    m = battles.n_models
    played = np.bincount(battles.model_a, minlength=m) + np.bincount(battles.model_b, minlength=m)
    return RatingResult(
        models=battles.models,
        ratings=ratings,
        ci_low=iv.lo,
        ci_high=iv.hi,
        se=se,
        rank=ranks_from_ratings(ratings),
        rank_ub=conservative_rank(iv.lo, iv.hi),
        battles=played,
        method="style",
        interval=iv.kind,
        bootstrap_rounds=len(iv.samples) if iv.samples is not None else 0,
        rank_ci_low=iv.rank_lo,
        rank_ci_high=iv.rank_hi,
        samples=iv.samples,
        **fit,
    )
