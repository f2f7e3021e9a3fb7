"""The fast paths behind the refit at millions of votes, against plain reference computations.

- online Elo: bit-identical to the straightforward loop (argsort of the timestamps, then one update per
  battle) whether timestamps are sorted, shuffled or absent, under every ties policy;
- the BT bootstrap's Poisson resampling: cell counts have the Poisson law, and its intervals match the
  classical multinomial ("resample battles with replacement") bootstrap's on the same votes;
- the batched fixed-preconditioner fit equals a Newton fit per round;
- style control's likelihood, gradient and Hessian equal the dense-design-matrix formulas, and the warm
  start reaches the same optimum as a start from zero.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalcore.ratings import Battles, aggregate, bootstrap_bradley_terry, simulate_battles, style_fit
from evalcore.ratings.bootstrap import fit_columns, fit_many, poisson_resample
from evalcore.ratings.bt import newton_fit
from evalcore.ratings.counts import pair_counts_from_arrays, win_weights
from evalcore.ratings.elo import elo_ratings
from evalcore.ratings.style_fit import StyleProblem

SIX = np.array([1250.0, 1210.0, 1190.0, 1100.0, 1050.0, 900.0])


def _reference_elo(battles, ties, k=4.0, base=10.0, scale=400.0, initial=1000.0):
    """Online Elo as first written: stable argsort of tstamp (else file order), one update per battle."""
    out = battles.outcome
    keep = {"half": np.ones(out.shape, bool), "drop": out <= 1, "drop-bothbad": out != 3}[ties]
    order = np.arange(len(battles)) if battles.tstamp is None else np.argsort(battles.tstamp, kind="stable")
    ratings = [initial] * battles.n_models
    for t in order[keep[order]]:
        a, b = int(battles.model_a[t]), int(battles.model_b[t])
        s = 1.0 if out[t] == 0 else 0.0 if out[t] == 1 else 0.5
        expected = 1.0 / (1.0 + math.exp((ratings[b] - ratings[a]) / scale * math.log(base)))
        delta = k * (s - expected)
        ratings[a] += delta
        ratings[b] -= delta
    return np.asarray(ratings)


@pytest.mark.parametrize("ties", ["half", "drop", "drop-bothbad"])
def test_online_elo_is_bit_identical_to_the_plain_loop(ties):
    rng = np.random.default_rng(3)
    base = simulate_battles(SIX, 3_000, rng=rng)
    sorted_ts = np.sort(rng.uniform(0, 1e6, len(base)))
    sorted_ts[100:110] = sorted_ts[100]  # equal timestamps keep file order
    cases = {
        "sorted": sorted_ts,
        "shuffled": rng.permutation(sorted_ts),
        "absent": None,
    }
    for name, ts in cases.items():
        battles = Battles(base.models, base.model_a, base.model_b, base.outcome, ts)
        ours = elo_ratings(battles, k=16.0, ties=ties)
        np.testing.assert_array_equal(ours, _reference_elo(battles, ties, k=16.0), err_msg=name)


def test_poisson_resample_has_the_poisson_law_per_cell():
    counts = pair_counts_from_arrays(
        ["a", "b", "c"], [0, 1], [1, 2], [3.0, 40.0], [7.0, 0.0], [2.0, 5.0], [1.0, 0.0]
    )
    rng = np.random.default_rng(0)
    w, n = poisson_resample(counts, "half", 40_000, rng)
    assert w.shape == n.shape == (2, 40_000)
    # n ~ Poisson(all battles of the pair); w = wins_i + half of the ties, each Poisson.
    np.testing.assert_allclose(n.mean(axis=1), counts.total, rtol=0.02)
    np.testing.assert_allclose(n.var(axis=1), counts.total, rtol=0.05)
    np.testing.assert_allclose(
        w.mean(axis=1), counts.wins_i + 0.5 * (counts.ties + counts.bothbad), rtol=0.02
    )
    np.testing.assert_allclose(
        w.var(axis=1), counts.wins_i + 0.25 * (counts.ties + counts.bothbad), rtol=0.05
    )
    w_drop, n_drop = poisson_resample(counts, "drop", 40_000, rng)
    np.testing.assert_allclose(n_drop.mean(axis=1), counts.wins_i + counts.wins_j, rtol=0.02)
    assert np.all(w_drop <= n_drop)


def test_poisson_bootstrap_matches_the_multinomial_bootstrap():
    """Same votes, 2,000 rounds each: 95% interval ends agree within Monte-Carlo error (a few points)."""
    counts = aggregate(simulate_battles(SIX, 8_000, rng=np.random.default_rng(9)))
    ours = bootstrap_bradley_terry(counts, rounds=2_000, seed=1)
    cells = counts.cells()
    draws = np.random.default_rng(2).multinomial(int(cells.sum()), (cells / cells.sum()).ravel(), size=2_000)
    b_ij, b_ji = win_weights(draws.reshape(2_000, -1, 4), "half")
    point = newton_fit(counts.i, counts.j, *win_weights(cells, "half"), counts.n_models)
    theta, ok = fit_many(counts.i, counts.j, b_ij, b_ji, counts.n_models, point.theta, point.hessian)
    assert ok.all()
    classic = 400.0 / np.log(10.0) * (theta - theta.mean(axis=1, keepdims=True)) + 1000.0
    lo, hi = np.percentile(classic, [2.5, 97.5], axis=0)
    width = hi - lo
    np.testing.assert_allclose(ours.ci_high - ours.ci_low, width, rtol=0.12)
    np.testing.assert_allclose(ours.ci_low, lo, atol=0.12 * width.max())
    np.testing.assert_allclose(ours.samples.std(axis=0), classic.std(axis=0), rtol=0.1)


def test_batched_fit_equals_newton_per_round():
    counts = aggregate(simulate_battles(SIX, 4_000, rng=np.random.default_rng(4)))
    point = newton_fit(counts.i, counts.j, *win_weights(counts.cells(), "half"), counts.n_models)
    w, n = poisson_resample(counts, "half", 30, np.random.default_rng(5))
    theta, ok = fit_columns(counts.i, counts.j, w, n, counts.n_models, point.theta, point.hessian)
    assert ok.all()
    for r in range(30):
        ref = newton_fit(counts.i, counts.j, w[:, r], n[:, r] - w[:, r], counts.n_models, tol=1e-10).theta
        np.testing.assert_allclose(theta[:, r], ref, atol=1e-4)
    # With a prior the same holds (the prior enters the gradient).
    theta_p, ok_p = fit_columns(
        counts.i, counts.j, w, n, counts.n_models, point.theta, point.hessian, prior=0.5
    )
    ref = newton_fit(counts.i, counts.j, w[:, 0], n[:, 0] - w[:, 0], counts.n_models, prior=0.5).theta
    assert ok_p.all()
    np.testing.assert_allclose(theta_p[:, 0], ref, atol=1e-4)


def _small_style_problem(seed=0, n=500, m=5, f=3):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    y = rng.choice([0.0, 1.0, 0.5], n, p=[0.45, 0.4, 0.15])
    w = rng.choice([0.0, 1.0], n, p=[0.1, 0.9])
    x = rng.normal(size=(n, f))
    return StyleProblem(a, b, y, w, x, m, 0.1, 2.0), a, b, y, w, x


@pytest.mark.parametrize("block", [64, 1 << 18])
def test_style_problem_matches_dense_formulas(block, monkeypatch):
    monkeypatch.setattr(style_fit, "BLOCK", block)  # 500 battles: 8 blocks of 64 (last one short), or one
    prob, a, b, y, w, x = _small_style_problem()
    m, f = prob.m, prob.f
    z = np.zeros((len(y), m + f))
    z[np.arange(len(y)), a] += 1.0
    z[np.arange(len(y)), b] -= 1.0
    z[:, m:] = x
    params = np.random.default_rng(1).normal(size=m + f)
    eta = z @ params
    np.testing.assert_allclose(prob.eta(params), eta, atol=1e-4)
    penalty = 0.5 * 0.1 * params[:m] @ params[:m] + 0.5 * 2.0 * params[m:] @ params[m:]
    ll = w @ (y * eta - np.logaddexp(0.0, eta)) - penalty
    assert prob.loglik(params, w) == pytest.approx(ll, rel=1e-4)
    p = 1.0 / (1.0 + np.exp(-eta))
    pen = np.concatenate([np.full(m, 0.1), np.full(f, 2.0)])
    g, p_ours = prob.grad_and_p(params, w)
    np.testing.assert_allclose(p_ours, p, atol=1e-4)
    np.testing.assert_allclose(g, z.T @ (w * (y - p)) - pen * params, atol=1e-4)
    v = w * p * (1 - p)
    np.testing.assert_allclose(prob.curvature(v), z.T @ (v[:, None] * z) + np.diag(pen), atol=1e-4)
    np.testing.assert_allclose(prob.curvature(v, penalised=False), z.T @ (v[:, None] * z), atol=1e-4)
    np.testing.assert_allclose(prob.curvature(prob.fisher(w, p)), prob.curvature(v), atol=1e-4)


def test_style_newton_reaches_the_same_optimum_from_any_start(monkeypatch):
    prob, *_ = _small_style_problem(seed=2)
    whole, *_ = prob.newton(prob.w, np.zeros(prob.m + prob.f))
    monkeypatch.setattr(style_fit, "BLOCK", 100)
    zero, _, g0, _ = prob.newton(prob.w, np.zeros(prob.m + prob.f))
    start = np.random.default_rng(3).normal(scale=0.5, size=prob.m + prob.f)
    start[: prob.m] -= start[: prob.m].mean()
    warm, iterations, g1, _ = prob.newton(prob.w, start)
    assert np.linalg.norm(g0) < 1e-8 and np.linalg.norm(g1) < 1e-8 and iterations >= 1
    np.testing.assert_allclose(warm, zero, atol=1e-4)
    np.testing.assert_allclose(zero, whole, atol=1e-4)  # blocks change nothing but round-off


@pytest.mark.parametrize("weighted", [False, True])
def test_aggregate_in_blocks_counts_every_battle_once(monkeypatch, weighted):
    """Blocks of 7 battles (the production block is 2^18) give the counts of a plain loop."""
    rng = np.random.default_rng(11)
    n, m = 1_000, 6
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    outcome = rng.integers(0, 4, n).astype(np.int8)
    battles = Battles(tuple("abcdef"), a.astype(np.int32), b.astype(np.int32), outcome, np.arange(n, dtype=float))
    weights = rng.uniform(0, 2, n) if weighted else None
    monkeypatch.setattr("evalcore.ratings.counts.AGGREGATE_BLOCK", 7)
    counts = aggregate(battles, weights=weights)
    expected: dict[tuple[int, int], np.ndarray] = {}
    for k in range(n):
        i, j = sorted((int(a[k]), int(b[k])))
        cell = int(outcome[k])
        if cell < 2 and a[k] > b[k]:
            cell = 1 - cell
        expected.setdefault((i, j), np.zeros(4))[cell] += 1.0 if weights is None else weights[k]
    assert [(int(i), int(j)) for i, j in zip(counts.i, counts.j)] == sorted(expected)
    np.testing.assert_allclose(counts.cells(), np.array([expected[key] for key in sorted(expected)]), atol=1e-4)


def test_style_fit_with_the_callers_counts_equals_aggregating_again():
    battles = simulate_battles(SIX, 3_000, rng=np.random.default_rng(12))
    rng = np.random.default_rng(13)
    battles = Battles(
        battles.models, battles.model_a, battles.model_b, battles.outcome, battles.tstamp,
        rng.poisson(300, (len(battles), 4)).astype(float), rng.poisson(300, (len(battles), 4)).astype(float),
    )  # fmt: skip
    from evalcore.ratings.style import fit_style_controlled

    alone = fit_style_controlled(battles, ties="half")
    given = fit_style_controlled(battles, ties="half", counts=aggregate(battles))
    np.testing.assert_allclose(given.ratings.ratings, alone.ratings.ratings, atol=1e-4)
    np.testing.assert_allclose(given.coefficients, alone.coefficients, atol=1e-4)
    # Under another ties policy the counts are not the fit's weights: they are made again, not used.
    dropped = fit_style_controlled(battles, ties="drop", counts=aggregate(battles))
    np.testing.assert_array_equal(dropped.coefficients, fit_style_controlled(battles, ties="drop").coefficients)
