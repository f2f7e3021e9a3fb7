"""Bradley-Terry maximum likelihood on aggregated pair counts.

The model: ``P(i beats j) = sigmoid(theta_i - theta_j)``. The fit is Newton's method with a backtracking
line search on the pair counts (the Hessian is an m x m weighted graph Laplacian), run until the
gradient norm of the log-likelihood is below ``tol`` (1e-8 by default). The scale freedom is removed by
centring ``theta``; ratings are reported on the Elo scale (see :mod:`evalcore.ratings.result`).

A finite MLE exists only when the directed "beat" graph is strongly connected (Ford's condition). When it
is not, :func:`fit_bradley_terry` raises ValueError naming the models at fault, unless a ``prior`` (an L2
penalty ``prior/2 * |theta|^2`` on the logit scale, i.e. a N(0, 1/prior) prior) is given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import expit, ndtri

from evalcore.boundary.validation import check_level, check_prior
from evalcore.ratings.counts import PairCounts, check_ties_policy, win_weights
from evalcore.ratings.result import (
    ELO_PER_LOGIT,
    RatingResult,
    conservative_rank,
    parse_anchor,
    ranks_from_ratings,
    to_elo_scale,
)


@dataclass(frozen=True)
class LogitFit:
    """A point fit on the logit scale (internal; also used by the bootstrap)."""

    theta: np.ndarray  # (m,), mean-centred
    hessian: np.ndarray  # (m, m), of the negative penalised log-likelihood
    iterations: int
    gradient_norm: float
    log_likelihood: float


def logistic_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``expit(x)`` written into ``out`` (may be ``x``) as ``1 / (1 + exp(-x))``: numpy's vectorised ``exp``
    makes this 2.5x faster than scipy's ``expit`` on the fits' large arrays (2.4 vs 5.9 ns an element);
    ``exp(-x) = inf`` gives 0, expit's answer."""
    np.negative(x, out=out)
    with np.errstate(over="ignore"):
        np.exp(out, out=out)
    out += 1.0
    return np.reciprocal(out, out=out)


def _log_likelihood(theta, i, j, w_ij, w_ji, prior):
    d = theta[i] - theta[j]
    ll = -(w_ij @ np.logaddexp(0.0, -d) + w_ji @ np.logaddexp(0.0, d))
    return float(ll - 0.5 * prior * theta @ theta)


def _gradient(theta, i, j, w_ij, n, m, prior):
    p = expit(theta[i] - theta[j])
    r = w_ij - n * p
    g = np.bincount(i, r, minlength=m) - np.bincount(j, r, minlength=m) - prior * theta
    return g, p


def laplacian(i: np.ndarray, j: np.ndarray, v: np.ndarray, m: int) -> np.ndarray:
    """Dense weighted Laplacian, shape (m, m): ``sum_k v_k (e_i - e_j)(e_i - e_j)^T`` (pairs unique)."""
    h = np.zeros((m, m))
    h[i, j] = -v
    h[j, i] = -v
    h[np.diag_indices(m)] = np.bincount(i, v, minlength=m) + np.bincount(j, v, minlength=m)
    return h


def newton_fit(
    i: np.ndarray,
    j: np.ndarray,
    w_ij: np.ndarray,
    w_ji: np.ndarray,
    m: int,
    *,
    prior: float = 0.0,
    tol: float = 1e-8,
    max_iter: int = 100,
    theta0: np.ndarray | None = None,
) -> LogitFit:
    """Newton's method for the BT log-likelihood on unique pairs ``(i, j)`` with weighted wins.

    Parameters
    ----------
    i, j : ndarray of int, shape (k,)
    w_ij, w_ji : ndarray, shape (k,)
        Weighted wins of i over j and of j over i.
    m : int
        Number of models.
    prior : float
        L2 penalty on theta.
    tol : float
        Stop when the gradient norm is below this.
    """
    n = w_ij + w_ji
    theta = np.zeros(m) if theta0 is None else theta0 - theta0.mean()
    ll = _log_likelihood(theta, i, j, w_ij, w_ji, prior)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        g, p = _gradient(theta, i, j, w_ij, n, m, prior)
        gnorm = float(np.linalg.norm(g))
        if gnorm < tol:
            it -= 1
            break
        h = laplacian(i, j, n * p * (1.0 - p), m)
        h[np.diag_indices(m)] += prior
        # The likelihood is flat along the all-ones direction; adding a multiple of 11^T makes the system
        # definite without changing the step (the gradient is orthogonal to 11^T when prior = 0).
        shift = max(float(np.mean(np.diag(h))), 1e-12) / m
        try:
            step = linalg.solve(h + shift, g, assume_a="pos")
        except (linalg.LinAlgError, ValueError):
            step = np.linalg.lstsq(h + shift, g, rcond=None)[0]
        t = 1.0
        while True:
            cand = theta + t * step
            cand -= cand.mean()
            ll_new = _log_likelihood(cand, i, j, w_ij, w_ji, prior)
            if ll_new >= ll - 1e-12 * abs(ll) or t < 1e-10:
                break
            t *= 0.5
        if np.max(np.abs(cand - theta)) < 1e-15:
            theta = cand
            break
        theta, ll = cand, ll_new
    g, p = _gradient(theta, i, j, w_ij, n, m, prior)
    h = laplacian(i, j, n * p * (1.0 - p), m)
    h[np.diag_indices(m)] += prior
    return LogitFit(theta, h, it, float(np.linalg.norm(g)), _log_likelihood(theta, i, j, w_ij, w_ji, prior))


def check_identifiable(models, i, j, w_ij, w_ji) -> None:
    """Raise ValueError when the BT MLE is not finite: disconnected pairs or unbeaten/winless groups."""
    m = len(models)
    n = w_ij + w_ji
    played = n > 0
    graph = coo_matrix((np.ones(int(played.sum())), (i[played], j[played])), shape=(m, m))
    n_comp, labels = connected_components(graph, directed=False)
    if n_comp > 1:
        groups = [[models[k] for k in np.flatnonzero(labels == c)] for c in range(n_comp)]
        groups.sort(key=len)
        shown = "; ".join("{" + ", ".join(g[:5]) + (", ..." if len(g) > 5 else "") + "}" for g in groups[:3])
        raise ValueError(
            f"the comparison graph is not connected: {n_comp} groups of models never met each other ({shown}); "
            "ratings across groups are not comparable. Add battles between them, or pass a prior (--prior)."
        )
    # Edge a -> b when a beat b at least once (with weight). Finite MLE iff strongly connected.
    src = np.concatenate([i[w_ij > 0], j[w_ji > 0]])
    dst = np.concatenate([j[w_ij > 0], i[w_ji > 0]])
    beat = coo_matrix((np.ones(src.size), (src, dst)), shape=(m, m)).tocsr()
    n_comp, labels = connected_components(beat, directed=True, connection="strong")
    if n_comp == 1:
        return
    # A component nobody outside ever beat: its members' ratings run off to +infinity (or the reverse).
    cond_in = np.zeros(n_comp, dtype=bool)
    cond_out = np.zeros(n_comp, dtype=bool)
    crossing = labels[src] != labels[dst]
    cond_out[labels[src[crossing]]] = True
    cond_in[labels[dst[crossing]]] = True
    unbeaten = [models[k] for k in np.flatnonzero(~cond_in[labels])]
    winless = [models[k] for k in np.flatnonzero(~cond_out[labels])]
    parts = []
    if unbeaten:
        parts.append(f"never lost to a model outside their group: {', '.join(unbeaten[:5])}")
    if winless:
        parts.append(f"never beat a model outside their group: {', '.join(winless[:5])}")
    raise ValueError(
        "no finite Bradley-Terry ratings: " + "; ".join(parts) + ". Their ratings would be infinite; "
        "collect more battles, or pass a small prior (--prior 0.01) to regularise the fit."
    )


def sandwich_covariance(counts: PairCounts, theta: np.ndarray, ties: str, prior: float) -> np.ndarray:
    """Robust (sandwich) covariance of theta, shape (m, m), ``H^+ B H^+`` on the logit scale.

    ``B`` sums the outer products of per-battle scores ``(y - p)(e_i - e_j)``, with ``y`` the battle's
    outcome for i (1, 0, or 1/2 for a tie counted as half). Under a correct model without ties B = H.
    """
    m = counts.n_models
    i, j = counts.i, counts.j
    p = expit(theta[i] - theta[j])
    b = counts.wins_i * (1 - p) ** 2 + counts.wins_j * p**2
    w_ij, w_ji = win_weights(counts.cells(), ties)
    n = w_ij + w_ji
    if ties == "half":
        b = b + (counts.ties + counts.bothbad) * (0.5 - p) ** 2
    elif ties == "drop-bothbad":
        b = b + counts.ties * (0.5 - p) ** 2
    h = laplacian(i, j, n * p * (1 - p), m)
    h[np.diag_indices(m)] += prior
    h_inv = np.linalg.pinv(h, hermitian=True)
    return h_inv @ laplacian(i, j, b, m) @ h_inv


def elo_se(cov: np.ndarray, models: tuple[str, ...], anchor: tuple[str, float] | None) -> np.ndarray:
    """Elo-scale standard errors from a logit covariance, for the chosen centring or anchor."""
    m = cov.shape[0]
    if anchor is None:
        c = np.eye(m) - 1.0 / m
        var = np.diag(c @ cov @ c)
    else:
        a = models.index(anchor[0])
        var = np.diag(cov) + cov[a, a] - 2 * cov[:, a]
    return ELO_PER_LOGIT * np.sqrt(np.clip(var, 0.0, None))


def fit_bradley_terry(
    counts: PairCounts,
    *,
    ties: str = "half",
    anchor=None,
    prior: float | None = None,
    level: float = 0.95,
    tol: float = 1e-8,
) -> RatingResult:
    """Fit Bradley-Terry by maximum likelihood; intervals from the sandwich standard errors.

    Parameters
    ----------
    counts : PairCounts
        From :func:`evalcore.ratings.aggregate` or :func:`evalcore.ratings.read_pair_counts`.
    ties : {"half", "drop", "drop-bothbad"}
    anchor : "MODEL=RATING" or (str, float), optional
        Shift the scale so this model has this rating; default mean 1000.
    prior : float, optional
        L2 penalty on the logit scale; needed when the MLE is not finite (otherwise ValueError).
    level : float
        Coverage of the normal (sandwich) interval in ``ci_low``/``ci_high``.
    tol : float
        Gradient-norm tolerance.

    Returns
    -------
    RatingResult
        ``interval == "sandwich"``; use :func:`bootstrap_bradley_terry` for percentile bootstrap intervals.
    """
    check_ties_policy(ties)
    check_level(level)
    anchor = parse_anchor(anchor)
    if anchor is not None and anchor[0] not in counts.models:
        raise ValueError(f"anchor model {anchor[0]!r} is not among the rated models")
    prior = check_prior(prior)
    if counts.n_pairs == 0:
        raise ValueError("no battles to fit")
    w_ij, w_ji = win_weights(counts.cells(), ties)
    if float((w_ij + w_ji).sum()) <= 0:
        raise ValueError(f"no decisive battles left under ties policy {ties!r}")
    if prior == 0.0:
        check_identifiable(counts.models, counts.i, counts.j, w_ij, w_ji)
    fit = newton_fit(counts.i, counts.j, w_ij, w_ji, counts.n_models, prior=prior, tol=tol)
    ratings = to_elo_scale(fit.theta, counts.models, anchor)
    se = elo_se(sandwich_covariance(counts, fit.theta, ties, prior), counts.models, anchor)
    z = ndtri(0.5 + level / 2)
    lo, hi = ratings - z * se, ratings + z * se
    return RatingResult(
        models=counts.models,
        ratings=ratings,
        ci_low=lo,
        ci_high=hi,
        se=se,
        rank=ranks_from_ratings(ratings),
        rank_ub=conservative_rank(lo, hi),
        battles=counts.battles_per_model(),
        method="bt",
        ties=ties,
        anchor=anchor,
        prior=prior,
        interval="sandwich",
        level=level,
        iterations=fit.iterations,
        gradient_norm=fit.gradient_norm,
        log_likelihood=fit.log_likelihood,
        notes=fit_notes(anchor, prior),
    )


def fit_notes(anchor, prior) -> tuple[str, ...]:
    notes = []
    if anchor is not None:
        notes.append(
            f"anchored: {anchor[0]} is fixed at {anchor[1]:g}, so its interval is zero by construction"
        )
    else:
        notes.append("scale: ratings are centred on a mean of 1000; 400 points = 10:1 odds")
    if prior:
        notes.append(f"an L2 prior of {prior:g} (logit scale) was used to keep the fit finite")
    return tuple(notes)
