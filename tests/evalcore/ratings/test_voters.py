"""Anomalous voters under a Bradley-Terry fit: planted random clickers and one-model favourers are found,
simulated honest voters are rarely flagged (seeded simulation; the rates are asserted), and the
per-vote p-values are uniform under the null."""

from __future__ import annotations

import numpy as np
import pytest

from evalcore.ratings import (
    BASE_RATING,
    ELO_PER_LOGIT,
    Battles,
    aggregate,
    fit_bradley_terry,
    simulate_battles,
    voters_test,
)
from evalcore.ratings.battles import A_WINS, B_WINS, TIE
from evalcore.ratings.voters import outcome_probabilities, vote_p_values

M = 8
FAVOURED = 3  # a mid-table model


def planted(
    seed: int, *, honest=200, honest_votes=30, clickers=10, click_votes=60, favourers=10, fav_votes=20
):
    """Honest voters drawn from the true strengths, coin-flipping clickers, and favourers who vote only in
    battles with their model (they recognise it) and always for it; shuffled into one vote stream."""
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1.5, 1.5, M)
    sim = simulate_battles(BASE_RATING + ELO_PER_LOGIT * theta, honest * honest_votes, rng=rng, tie_rate=0.1)
    a, b, o = [sim.model_a], [sim.model_b], [sim.outcome]
    voters = [f"honest-{k // honest_votes}" for k in range(honest * honest_votes)]
    n = clickers * click_votes
    pa = rng.integers(0, M, n)
    a.append(pa)
    b.append((pa + rng.integers(1, M, n)) % M)
    o.append(rng.integers(0, 2, n))
    voters += [f"clicker-{k // click_votes}" for k in range(n)]
    n = favourers * fav_votes
    other = (FAVOURED + rng.integers(1, M, n)) % M
    left = rng.random(n) < 0.5
    a.append(np.where(left, FAVOURED, other))
    b.append(np.where(left, other, FAVOURED))
    o.append(np.where(left, A_WINS, B_WINS))
    voters += [f"favourer-{k // fav_votes}" for k in range(n)]
    perm = rng.permutation(sum(len(x) for x in a))
    cat = [np.concatenate(x)[perm] for x in (a, b, o)]
    battles = Battles(sim.models, cat[0].astype(np.int32), cat[1].astype(np.int32), cat[2].astype(np.int8),
                      np.arange(perm.size, dtype=np.float64))  # fmt: skip
    return battles, np.asarray(voters, dtype=object)[perm]


def flag_rates(result) -> dict[str, float]:
    kinds = {}
    for voter, flagged in zip(result.voters, result.flagged):
        kinds.setdefault(voter.split("-")[0], []).append(bool(flagged))
    return {kind: float(np.mean(flags)) for kind, flags in kinds.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_voters_are_found_and_honest_ones_rarely_flagged(seed):
    battles, voters = planted(seed)
    fit = fit_bradley_terry(aggregate(battles))  # the current fit, planted votes included
    theta = (fit.ratings - BASE_RATING) / ELO_PER_LOGIT
    result = voters_test(
        voters, battles.model_a, battles.model_b, battles.outcome, theta, models=battles.models,
        tie_rate=float(np.mean(battles.outcome >= TIE)), rng=np.random.default_rng(seed),
    )  # fmt: skip
    rates = flag_rates(result)
    assert len(result.voters) == 220
    assert rates["honest"] <= 0.05
    assert rates["clicker"] >= 0.8
    assert rates["favourer"] >= 0.9
    favoured = {
        f for v, f, flag in zip(result.voters, result.favoured, result.flagged) if v.startswith("favourer")
    }
    assert favoured == {battles.models[FAVOURED]}
    rows = result.rows(flagged_only=True)
    assert all(row["flagged"] and row["p_value"] < 0.01 for row in rows)


def test_honest_flag_rate_is_near_alpha_on_a_large_honest_population():
    rng = np.random.default_rng(11)
    theta = np.linspace(-1.5, 1.5, M)
    sim = simulate_battles(BASE_RATING + ELO_PER_LOGIT * theta, 1000 * 40, rng=rng, tie_rate=0.1)
    voters = np.repeat([f"v{k}" for k in range(1000)], 40)
    result = voters_test(voters, sim.model_a, sim.model_b, sim.outcome, theta, models=sim.models,
                         tie_rate=0.1, alpha=0.05, rng=rng)  # fmt: skip
    assert result.flagged.mean() <= 0.05
    assert result.flagged.mean() > 0  # the test is not asleep


def test_vote_p_values_are_uniform_under_the_fit():
    rng = np.random.default_rng(3)
    theta = np.array([-1.0, 0.0, 0.7, 1.5])
    a = rng.integers(0, 4, 40_000)
    b = (a + rng.integers(1, 4, a.size)) % 4
    probs = outcome_probabilities(theta, a, b, 0.1)
    observed = (rng.random(a.size)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)
    p = vote_p_values(probs, observed, rng.random(a.size))
    hist = np.histogram(p, bins=10, range=(0, 1))[0] / a.size
    np.testing.assert_allclose(hist, 0.1, atol=0.01)


def test_voters_with_few_votes_and_unknown_models_are_not_tested():
    theta = np.zeros(3)
    result = voters_test(
        ["a"] * 5 + ["b"] * 25, np.r_[[0] * 5, [0] * 20, [-1] * 5], np.r_[[1] * 5, [2] * 25], np.zeros(30),
        theta, models=("x", "y", "z"), tie_rate=0.0, rng=np.random.default_rng(0),
    )  # fmt: skip
    assert result.voters == ("b",)
    assert result.votes.tolist() == [20]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 5}, "alpha must be between 0 and 1"),
        ({"tie_rate": 1.0}, "tie_rate"),
        ({"min_votes": 0}, "min_votes"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    args = dict(models=("x", "y"), tie_rate=0.1, rng=np.random.default_rng(0)) | kwargs
    with pytest.raises(ValueError, match=message):
        voters_test(["a"], np.array([0]), np.array([1]), np.array([0]), np.zeros(2), **args)
    with pytest.raises(ValueError, match="same length"):
        voters_test(["a", "b"], np.array([0]), np.array([1]), np.array([0]), np.zeros(2),
                    models=("x", "y"), tie_rate=0.1, rng=np.random.default_rng(0))  # fmt: skip
