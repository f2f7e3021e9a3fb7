"""Provisional ratings: who is provisional, exact (Clopper-Pearson) bounds on the BT scale, ranks.

Pinned values: the Clopper-Pearson interval is ``Beta(alpha/2; s, n-s+1)`` to ``Beta(1-alpha/2; s+1, n-s)``
(Clopper and Pearson, 1934); for ``s = n`` its lower bound is ``(alpha/2) ** (1/n)``, 0.8316 for 20 of 20.
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
from scipy.stats import beta

from evalcore.cli import main
from evalcore.ratings import (
    OUTCOME_NAMES,
    aggregate,
    battles_from_arrays,
    bootstrap_bradley_terry,
    fit_bradley_terry,
    provisional,
    simulate_battles,
    write_battles_csv,
)
from evalcore.ratings.provisional import exact_interval, mark_provisional, provisional_mask
from evalcore.ratings.result import ELO_PER_LOGIT


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


@pytest.mark.parametrize(("wins", "n"), [(15, 20), (1, 9), (40, 41), (3, 3), (0, 12)])
def test_one_opponent_is_clopper_pearson_through_the_logit(wins, n):
    low, high = exact_interval(np.array([0.3]), np.array([n]), wins, level=0.95)
    want_low = -math.inf if wins == 0 else 0.3 + _logit(beta.ppf(0.025, wins, n - wins + 1))
    want_high = math.inf if wins == n else 0.3 + _logit(beta.ppf(0.975, wins + 1, n - wins))
    assert low == pytest.approx(want_low, abs=1e-4)
    assert high == pytest.approx(want_high, abs=1e-4)


def test_twenty_of_twenty_is_at_least_277_points_above_its_opponent():
    low, high = exact_interval(np.array([0.0]), np.array([20]), 20)
    assert 1 / (1 + math.exp(-low)) == pytest.approx(0.025 ** (1 / 20), abs=1e-4)  # 0.8316
    assert low * ELO_PER_LOGIT == pytest.approx(277.39, abs=0.01)
    assert high == math.inf


def test_exact_interval_covers_with_several_opponents():
    """Sampled records against three known opponents: the interval holds the truth at least 95% of the time."""
    rng = np.random.default_rng(7)
    theta_opp, n_opp, truth = np.array([-0.8, 0.0, 1.1]), np.array([9, 14, 7]), 0.4
    p = 1 / (1 + np.exp(-(truth - theta_opp)))
    covered = 0
    trials = 150
    for _ in range(trials):
        wins = int(rng.binomial(n_opp, p).sum())
        low, high = exact_interval(theta_opp, n_opp, wins)
        covered += low <= truth <= high
    assert covered / trials >= 0.94  # exact tests are conservative: nominal 0.95 or more, up to noise


def _twenty_of_twenty():
    """Five rated models with 4,000 battles among them, and a newcomer that beat the middle one 20 times."""
    base = simulate_battles(
        np.array([100.0, 50.0, 0.0, -50.0, -100.0]), 4_000, rng=np.random.default_rng(0),
        models=("m1", "m2", "m3", "m4", "m5"),
    )  # fmt: skip
    names = [base.models[k] for k in base.model_a] + ["newbie"] * 20
    others = [base.models[k] for k in base.model_b] + ["m3"] * 20
    winners = [OUTCOME_NAMES[o] for o in base.outcome] + ["model_a"] * 20
    return aggregate(battles_from_arrays(names, others, winners))


def test_a_newcomer_with_twenty_wins_of_twenty_is_provisional_with_an_honest_interval():
    counts = _twenty_of_twenty()
    plain = bootstrap_bradley_terry(counts, rounds=200, seed=0, prior=0.01)
    k, opp = counts.models.index("newbie"), counts.models.index("m3")
    # The problem: the prior's fit puts the newcomer ~870 points above m3, the bootstrap agrees, rank 1.
    assert plain.ci_low[k] - plain.ratings[opp] > 800 and plain.rank_ub[k] == 1
    marked = mark_provisional(plain, counts)
    assert marked.provisional.tolist() == [False, False, False, False, False, True]
    assert marked.ci_low[k] - marked.ratings[opp] == pytest.approx(277.39, abs=0.5)
    assert marked.ci_high[k] == math.inf
    assert marked.rank[k] >= 2 and marked.rank_ub[k] >= 2
    best = int(np.argmax(np.where(marked.provisional, -np.inf, marked.ratings)))
    assert marked.rank[best] == 1 and marked.rank_ub[best] == 1
    # Rated models' intervals and ratings are untouched; their ranks count rated models only.
    rated = ~marked.provisional
    np.testing.assert_allclose(marked.ci_low[rated], plain.ci_low[rated])
    assert sorted(marked.rank[rated].tolist()) == [1, 2, 3, 4, 5]
    rows = {r["model"]: r for r in marked.to_rows()}
    assert rows["newbie"]["provisional"] is True and rows["m1"]["provisional"] is False
    assert any("provisional" in note for note in marked.notes)


def test_all_losses_leaves_the_lower_side_open_and_sits_below():
    base = simulate_battles(np.array([60.0, 0.0, -60.0]), 2_000, rng=np.random.default_rng(1))
    names = [base.models[k] for k in base.model_a] + ["loser"] * 15
    others = [base.models[k] for k in base.model_b] + ["m0", "m1", "m2"] * 5
    winners = [OUTCOME_NAMES[o] for o in base.outcome] + ["model_b"] * 15
    counts = aggregate(battles_from_arrays(names, others, winners))
    marked = mark_provisional(fit_bradley_terry(counts, prior=0.01), counts, min_battles=0)
    k = counts.models.index("loser")
    assert marked.provisional.tolist() == [True, False, False, False]
    assert marked.ci_low[k] == -math.inf and math.isfinite(marked.ci_high[k])
    assert marked.ci_high[k] < max(marked.ratings[1:])
    assert marked.rank_ub[k] >= 2


def test_threshold_counts_every_battle_and_zero_keeps_only_separable_records():
    battles = simulate_battles(np.array([0.0, 0.0]), 300, rng=np.random.default_rng(2), tie_rate=0.2)
    counts = aggregate(battles)
    assert provisional_mask(counts, min_battles=300).tolist() == [False, False]
    assert provisional_mask(counts, min_battles=301).tolist() == [True, True]
    assert provisional_mask(counts, min_battles=0).tolist() == [False, False]


def test_every_model_provisional_keeps_rank_one():
    counts = aggregate(simulate_battles(np.array([200.0, 0.0]), 60, rng=np.random.default_rng(3)))
    marked = mark_provisional(fit_bradley_terry(counts), counts)
    assert marked.provisional.all() and sorted(marked.rank.tolist()) == [1, 2]


def test_bad_arguments_are_refused():
    counts = aggregate(simulate_battles(np.array([0.0, 1.0]), 50, rng=np.random.default_rng(4)))
    result = fit_bradley_terry(counts)
    with pytest.raises(ValueError, match="min_battles"):
        mark_provisional(result, counts, min_battles=-1)
    other = aggregate(battles_from_arrays(["x", "y"], ["y", "x"], ["model_a", "model_a"]))
    with pytest.raises(ValueError, match="different models"):
        mark_provisional(result, other)
    with pytest.raises(ValueError, match="level"):
        exact_interval(np.array([0.0]), np.array([5]), 2, level=1.5)


@pytest.fixture(scope="module")
def newcomer_csv(tmp_path_factory):
    counts_free = simulate_battles(
        np.array([50.0, 0.0, -50.0]), 1_500, rng=np.random.default_rng(5), models=("m1", "m2", "m3")
    )
    names = [counts_free.models[k] for k in counts_free.model_a] + ["newbie"] * 20
    others = [counts_free.models[k] for k in counts_free.model_b] + ["m2"] * 20
    winners = [OUTCOME_NAMES[o] for o in counts_free.outcome] + ["model_a"] * 20
    path = tmp_path_factory.mktemp("votes") / "newcomer.csv"
    write_battles_csv(battles_from_arrays(names, others, winners), path)
    return path


@pytest.mark.parametrize("method", ["bt", "elo"])
def test_cli_marks_the_newcomer_provisional(newcomer_csv, capsys, method):
    args = ["rate", str(newcomer_csv), "--method", method, "--bootstrap", "20", "--prior", "0.01"]
    if method == "elo":
        args = args[:-2]
    assert main(args) == 0
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["newbie"]["provisional"] == "true" and rows["m1"]["provisional"] == "false"
    assert rows["newbie"]["ci_high"] == "inf" and int(rows["newbie"]["rank"]) >= 2
    assert int(rows["newbie"]["rank_ub"]) >= 2


def test_cli_json_writes_an_open_bound_as_null_and_takes_the_threshold(newcomer_csv, capsys):
    assert main(["rate", str(newcomer_csv), "--bootstrap", "0", "--prior", "0.01", "--format", "json",
                 "--provisional-votes", "5000"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc["provisional_votes"] == 5000
    rows = {r["model"]: r for r in doc["ratings"]}
    assert rows["newbie"]["ci_high"] is None and rows["newbie"]["provisional"] is True
    assert all(r["provisional"] for r in doc["ratings"])  # 5,000 battles needed: nobody has them


def test_cli_refuses_a_negative_threshold(newcomer_csv, capsys):
    assert main(["rate", str(newcomer_csv), "--provisional-votes", "-3"]) == 2
    assert "--provisional-votes" in capsys.readouterr().err


def test_long_records_use_the_fourier_path_with_the_same_answer(monkeypatch):
    theta_opp, n_opp = np.array([-0.5, 0.2, 0.9]), np.array([800, 900, 700])
    fourier = exact_interval(theta_opp, n_opp, 1300)  # 2,400 battles: past the direct limit
    monkeypatch.setattr(provisional, "_DIRECT_MAX", 10**6)
    direct = exact_interval(theta_opp, n_opp, 1300)
    assert fourier == pytest.approx(direct, abs=1e-4)
    assert fourier[0] < fourier[1] and math.isfinite(fourier[0]) and math.isfinite(fourier[1])
