"""Anomalous voters: how surprising is one voter's record under the current Bradley-Terry fit?

Three one-sided tests per voter, each a p-value under the null hypothesis "this voter votes as the fit
predicts", combined with Bonferroni (``p = min(1, 3 * min(p_surprise, p_random, p_favour))``); a voter
is flagged when ``p < alpha``.

Surprise (after the Chatbot Arena paper, Chiang et al. 2024, section on anomalous users)
    Each vote gets a p-value: the probability, under the fit, of an outcome no more likely than the
    one observed. Outcomes are A wins, B wins and a tie (either kind), with
    ``P(A) = (1 - t) sigmoid(theta_a - theta_b)``, ``P(B) = (1 - t) sigmoid(theta_b - theta_a)`` and
    ``P(tie) = t`` (``t`` the overall tie rate). The p-value is randomised over the outcomes as likely
    as the observed one, so it is exactly uniform under the null. The voter's votes, in time order, are
    combined sequentially with Fisher's method, ``M_j = -2 sum_{i<=j} log p_i ~ chi2(2j)``, checked at
    ``j`` = 10, 20, 40, ... and at the voter's last vote; the smallest checkpoint p-value times the
    number of checkpoints (Bonferroni) is ``p_surprise``. It catches voters whose choices the fit
    finds unlikely again and again: random clickers, and anyone voting against the consensus.

Random clicking
    The likelihood ratio of "picks A or B by a coin flip" against the fit, summed over the voter's votes
    (ties count the same under both), standardised by its mean and variance under the fit: a z-score
    and its upper normal tail, ``p_random``. It is the most powerful test against that one alternative
    (Neyman-Pearson) and finds coin-flippers in 30 votes where Fisher's combination needs several times
    as many.

Favour
    For every model the voter saw at least ``min_model_votes`` times: the model's score in those
    votes (1 a win, 0.5 a tie, 0 a loss) against its expectation under the fit, as a z-score; the
    largest z, Bonferroni over the models tested, is ``p_favour``. It catches a voter who always
    picks one model, even one the fit already rates high (which the surprise test cannot see).

All use normal or chi-square reference distributions; with the default ``alpha`` of 0.01 and at
least ``min_votes`` (20) votes, simulated honest voters are flagged about 1% of the time
(``tests/evalcore/test_voters.py`` plants voters and checks the rates).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import chdtrc, expit, ndtr

from evalcore.boundary.validation import check_probability
from evalcore.ratings.battles import A_WINS, B_WINS

CHECKPOINT_START = 10


@dataclass(frozen=True)
class VoterTest:
    """One row per voter tested (u voters), in the order of first appearance.

    Attributes
    ----------
    voters : tuple of str, shape (u,)
    votes : ndarray of int, shape (u,)
        Votes tested (those between two models the fit knows).
    p_surprise, p_random, p_favour, p_value : ndarray, shape (u,)
    fisher : ndarray, shape (u,)
        ``-2 sum log p_i`` over all the voter's votes (``2 * votes`` expected under the null).
    favoured : tuple of str, shape (u,)
        The model with the largest favour z-score ("" when none was tested).
    favour_z : ndarray, shape (u,)
    flagged : ndarray of bool, shape (u,)
    alpha : float
    """

    voters: tuple[str, ...]
    votes: np.ndarray
    p_surprise: np.ndarray
    p_random: np.ndarray
    p_favour: np.ndarray
    p_value: np.ndarray
    fisher: np.ndarray
    favoured: tuple[str, ...]
    favour_z: np.ndarray
    flagged: np.ndarray
    alpha: float

    def rows(self, *, flagged_only: bool = False) -> list[dict]:
        """Plain dicts (JSON-safe), one per voter."""
        out = []
        for k, voter in enumerate(self.voters):
            if flagged_only and not self.flagged[k]:
                continue
            out.append(
                {
                    "voter": voter, "votes": int(self.votes[k]), "p_value": float(self.p_value[k]),
                    "p_surprise": float(self.p_surprise[k]), "p_random": float(self.p_random[k]),
                    "p_favour": float(self.p_favour[k]),
                    "fisher": float(self.fisher[k]), "favoured": self.favoured[k],
                    "favour_z": float(self.favour_z[k]), "flagged": bool(self.flagged[k]),
                }
            )  # fmt: skip
        return out


def outcome_probabilities(theta: np.ndarray, a: np.ndarray, b: np.ndarray, tie_rate: float) -> np.ndarray:
    """P(A wins), P(B wins), P(tie) under the fit, shape (n, 3)."""
    p_a = expit(theta[a] - theta[b])
    return np.column_stack([(1 - tie_rate) * p_a, (1 - tie_rate) * (1 - p_a), np.full(a.shape, tie_rate)])


def vote_p_values(probs: np.ndarray, observed: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Randomised p-values, shape (n,): P(outcome less likely than observed) + u * P(as likely)."""
    p_obs = probs[np.arange(probs.shape[0]), observed][:, None]
    tol = 1e-12
    less = np.where(probs < p_obs - tol, probs, 0.0).sum(axis=1)
    same = np.where(np.abs(probs - p_obs) <= tol, probs, 0.0).sum(axis=1)
    return np.clip(less + u * same, 1e-300, 1.0)


def _random_clicker(group, probs, observed, n_groups: int):
    """Likelihood ratio of a coin-flipping voter against the fit, as a z-score per voter, and its p-value."""
    t = probs[:, 2]
    half = 0.5 * (1 - t)
    log_q = np.log(np.column_stack([half, half, np.maximum(t, 1e-300)]))
    log_p = np.log(np.maximum(probs, 1e-300))
    llr = log_q - log_p  # (n, 3): the log ratio for each possible outcome
    llr[:, 2] = 0.0  # a tie is as likely under both
    obs = llr[np.arange(llr.shape[0]), observed]
    mean = (probs * llr).sum(axis=1)
    var = (probs * llr**2).sum(axis=1) - mean**2
    diff = np.bincount(group, obs - mean, minlength=n_groups)
    sd = np.sqrt(np.bincount(group, var, minlength=n_groups))
    z = np.where(sd > 0, diff / np.maximum(sd, 1e-300), 0.0)
    return z, ndtr(-z)


def _checkpoints(n: int) -> list[int]:
    points, j = [], CHECKPOINT_START
    while j < n:
        points.append(j)
        j *= 2
    return points + [n]


def _surprise(order: np.ndarray, starts: np.ndarray, counts: np.ndarray, pv: np.ndarray):
    """Sequential Fisher p-value per voter (votes already grouped by ``order``), and the full statistic."""
    cum = np.concatenate([[0.0], np.cumsum(-2.0 * np.log(pv[order]))])
    groups, points = [], []
    for g, n in enumerate(counts.tolist()):
        if n:
            marks = _checkpoints(n)
            groups.extend([g] * len(marks))
            points.extend(marks)
    groups_a, points_a = np.asarray(groups, dtype=np.int64), np.asarray(points, dtype=np.int64)
    stats = cum[starts[groups_a] + points_a] - cum[starts[groups_a]]
    p_points = chdtrc(2 * points_a, stats)
    n_groups = counts.shape[0]
    smallest = np.ones(n_groups)
    np.minimum.at(smallest, groups_a, p_points)
    marks_per_group = np.bincount(groups_a, minlength=n_groups)
    p_seq = np.minimum(1.0, marks_per_group * smallest)
    p_seq[counts == 0] = 1.0
    fisher = np.zeros(n_groups)
    full = points_a == counts[groups_a]
    fisher[groups_a[full]] = stats[full]
    return p_seq, fisher


def _favour(group: np.ndarray, a, b, probs, observed, n_groups: int, m: int, min_model_votes: int):
    """Largest one-sided favour z per voter, its model index, and the Bonferroni p-value."""
    score_a = np.where(observed == 0, 1.0, np.where(observed == 1, 0.0, 0.5))
    exp_a = probs[:, 0] + 0.5 * probs[:, 2]
    var = probs[:, 0] + 0.25 * probs[:, 2] - exp_a**2  # the same for b: its score is 1 - score_a
    cells = n_groups * m
    diff = np.zeros(cells)
    variance = np.zeros(cells)
    seen = np.zeros(cells)
    for idx, score, expect in ((group * m + a, score_a, exp_a), (group * m + b, 1 - score_a, 1 - exp_a)):
        diff += np.bincount(idx, score - expect, minlength=cells)
        variance += np.bincount(idx, var, minlength=cells)
        seen += np.bincount(idx, minlength=cells)
    z = np.where(
        (seen >= min_model_votes) & (variance > 0), diff / np.sqrt(np.maximum(variance, 1e-300)), -np.inf
    )
    z = z.reshape(n_groups, m)
    tested = (seen.reshape(n_groups, m) >= min_model_votes).sum(axis=1)
    best = np.argmax(z, axis=1)
    best_z = z[np.arange(n_groups), best]
    p = np.where(tested > 0, np.minimum(1.0, tested * ndtr(-best_z)), 1.0)
    return best_z, np.where(tested > 0, best, -1), p


def voters_test(
    voter: Sequence[str],
    model_a: np.ndarray,
    model_b: np.ndarray,
    outcome: np.ndarray,
    theta: np.ndarray,
    *,
    models: Sequence[str],
    tie_rate: float,
    alpha: float = 0.01,
    min_votes: int = 20,
    min_model_votes: int = 5,
    rng: np.random.Generator,
) -> VoterTest:
    """Test every voter with at least ``min_votes`` votes (see the module docstring).

    Parameters
    ----------
    voter : sequence or ndarray of str or int, length n
        Who cast each vote (a session or IP hash, or an integer code for one), votes in time order.
    model_a, model_b : ndarray of int, shape (n,)
        Indices into ``theta`` and ``models``; a vote with a negative index (a model the fit does not
        know) is not tested.
    outcome : ndarray of int, shape (n,)
        Codes of :data:`evalcore.ratings.battles.OUTCOME_NAMES` (both tie kinds are a tie).
    theta : ndarray, shape (m,)
        The fit on the logit scale.
    tie_rate : float
        In [0, 1): the share of ties the fit assumes for every pair.
    rng : numpy Generator
        For the randomised p-values.
    """
    check_probability(alpha, "alpha")
    if not 0 <= tie_rate < 1:
        raise ValueError(f"tie_rate must be in [0, 1), got {tie_rate}")
    if min_votes < 1 or min_model_votes < 1:
        raise ValueError("min_votes and min_model_votes must be at least 1")
    a, b = np.asarray(model_a, dtype=np.int64), np.asarray(model_b, dtype=np.int64)
    voter_arr = np.asarray(voter)
    codes = np.asarray(outcome, dtype=np.int64)
    if not (a.shape == b.shape == codes.shape == voter_arr.shape):
        raise ValueError("voter, model_a, model_b and outcome must have the same length")
    theta = np.asarray(theta, dtype=np.float64)
    m = theta.shape[0]
    known = (a >= 0) & (b >= 0) & (a < m) & (b < m) & (a != b)
    a, b, codes, voter_arr = a[known], b[known], codes[known], voter_arr[known]
    observed = np.where(codes == A_WINS, 0, np.where(codes == B_WINS, 1, 2))
    probs = outcome_probabilities(theta, a, b, float(tie_rate))
    pv = vote_p_values(probs, observed, rng.random(a.shape[0]))
    names, first, group = np.unique(voter_arr, return_index=True, return_inverse=True)
    counts = np.bincount(group, minlength=names.shape[0])
    order = np.argsort(group, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    p_surprise, fisher = _surprise(order, starts, counts, pv)
    _, p_random = _random_clicker(group, probs, observed, names.shape[0])
    favour_z, favoured, p_favour = _favour(group, a, b, probs, observed, names.shape[0], m, min_model_votes)
    enough = counts >= min_votes
    smallest = np.minimum(np.minimum(p_surprise, p_random), p_favour)
    p_value = np.where(enough, np.minimum(1.0, 3 * smallest), 1.0)
    keep = np.argsort(first, kind="stable")
    keep = keep[enough[keep]]
    return VoterTest(
        voters=tuple(str(names[k]) for k in keep),
        votes=counts[keep],
        p_surprise=p_surprise[keep],
        p_random=p_random[keep],
        p_favour=p_favour[keep],
        p_value=p_value[keep],
        fisher=fisher[keep],
        favoured=tuple(models[favoured[k]] if favoured[k] >= 0 else "" for k in keep),
        favour_z=np.where(np.isfinite(favour_z[keep]), favour_z[keep], 0.0),
        flagged=p_value[keep] < alpha,
        alpha=float(alpha),
    )
