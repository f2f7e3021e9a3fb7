"""Bradley-Terry: recovery of known ratings, intervals that cover, scale conventions, failure modes.

Pinned numbers come from the simulations in issue 3 (six models, 24,936 votes: BT recovers the true
ratings to about 4 points RMS; six models, 6,000 votes: B and C overlap; 95% bootstrap intervals cover
the truth in 88-100% of 100 independent vote sets) and from evalica 0.4.2's golden outputs on the
llmfao crowd data (dustalov/evalica, ``evalica-llmfao-golden.csv``).
"""

from __future__ import annotations

import csv

import numpy as np
import pytest
from scipy.stats import spearmanr

from evalcore.ratings import (
    ELO_PER_LOGIT,
    aggregate,
    battles_from_records,
    bootstrap_bradley_terry,
    fit_bradley_terry,
    pair_counts_from_arrays,
    read_battles,
    simulate_battles,
)

TRUE_SIX = np.array([174.0, 104.0, 52.0, 0.0, -69.0, -261.0])
CLOSE_SIX = np.array([1250.0, 1210.0, 1190.0, 1120.0, 1060.0, 1000.0])


def _rms(x, y):
    return float(np.sqrt(np.mean((x - y) ** 2)))


def test_bt_recovers_true_ratings_and_ignores_vote_order():
    battles = simulate_battles(TRUE_SIX, 24_936, rng=np.random.default_rng(2024))
    result = fit_bradley_terry(aggregate(battles))
    assert _rms(result.ratings - 1000.0, TRUE_SIX) < 8.0  # seed's figure: about 4
    assert result.gradient_norm < 1e-8
    assert list(result.rank) == [1, 2, 3, 4, 5, 6]
    # Zero spread over vote orders: the fit only sees counts.
    shuffled = battles.select(np.random.default_rng(1).permutation(len(battles)))
    again = fit_bradley_terry(aggregate(shuffled))
    np.testing.assert_allclose(again.ratings, result.ratings, atol=1e-9)


def test_bootstrap_and_sandwich_agree_and_are_seeded():
    battles = simulate_battles(TRUE_SIX, 24_936, rng=np.random.default_rng(7))
    counts = aggregate(battles)
    boot = bootstrap_bradley_terry(counts, rounds=400, seed=3)
    again = bootstrap_bradley_terry(counts, rounds=400, seed=3)
    np.testing.assert_array_equal(boot.ci_low, again.ci_low)
    assert boot.samples.shape == (400, 6) and boot.bootstrap_rounds == 400
    np.testing.assert_allclose(boot.samples.std(axis=0), boot.se, rtol=0.2)
    assert np.all(boot.ci_low < boot.ratings) and np.all(boot.ratings < boot.ci_high)
    np.testing.assert_array_equal(boot.rank_ci_low, [1, 2, 3, 4, 5, 6])


def test_close_models_overlap_and_conservative_rank():
    battles = simulate_battles(CLOSE_SIX, 6_000, rng=np.random.default_rng(11))
    boot = bootstrap_bradley_terry(aggregate(battles), rounds=500, seed=0)
    b, c = 1, 2  # 1210 and 1190
    assert boot.ci_low[b] < boot.ci_high[c] and boot.ci_low[c] < boot.ci_high[b]
    # rank_ub = 1 + number of models whose lower bound is above this model's upper bound.
    expected = [1 + int(np.sum(boot.ci_low > boot.ci_high[k])) for k in range(6)]
    assert list(boot.rank_ub) == expected
    assert boot.rank_ub[c] <= boot.rank[c]


def test_bootstrap_intervals_cover_in_repeated_simulations():
    """Coverage over 100 independent vote sets: each model's 95% interval holds its true rating in 88-100%."""
    rng = np.random.default_rng(20240601)
    centred_truth = CLOSE_SIX - CLOSE_SIX.mean()
    hits = np.zeros(6)
    for _ in range(100):
        counts = aggregate(simulate_battles(CLOSE_SIX, 6_000, rng=rng))
        boot = bootstrap_bradley_terry(counts, rounds=300, rng=rng, keep_samples=False)
        hits += (boot.ci_low - 1000 <= centred_truth) & (centred_truth <= boot.ci_high - 1000)
    assert np.all(hits >= 88), hits
    assert np.all(hits <= 100)


def test_anchor_shifts_scale_and_collapses_its_interval():
    counts = aggregate(simulate_battles(TRUE_SIX, 5_000, rng=np.random.default_rng(5)))
    free = bootstrap_bradley_terry(counts, rounds=200, seed=1)
    anchored = bootstrap_bradley_terry(counts, rounds=200, seed=1, anchor="m3=1200")
    assert anchored.rating_of("m3") == pytest.approx(1200.0)
    assert anchored.ci_low[3] == anchored.ci_high[3] == pytest.approx(1200.0)
    assert anchored.se[3] == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(np.diff(anchored.ratings), np.diff(free.ratings), atol=1e-9)
    assert any("anchored" in note for note in anchored.notes)
    assert free.ratings.mean() == pytest.approx(1000.0)
    with pytest.raises(ValueError, match="anchor model 'nope'"):
        fit_bradley_terry(counts, anchor=("nope", 1000))
    with pytest.raises(ValueError, match="MODEL=RATING"):
        fit_bradley_terry(counts, anchor="m3")


def test_ties_policies():
    # a beats b 6-2 with 4 ties and 4 both-bad ties; a third model keeps the graph identifiable.
    counts = pair_counts_from_arrays(
        ("a", "b", "c"), [0, 0, 1], [1, 2, 2], [6, 3, 3], [2, 1, 1], [4, 0, 0], [4, 0, 0]
    )
    half = fit_bradley_terry(counts, ties="half")
    drop = fit_bradley_terry(counts, ties="drop")
    nobb = fit_bradley_terry(counts, ties="drop-bothbad")
    explicit = fit_bradley_terry(
        pair_counts_from_arrays(("a", "b", "c"), [0, 0, 1], [1, 2, 2], [10, 3, 3], [6, 1, 1]), ties="drop"
    )
    np.testing.assert_allclose(half.ratings, explicit.ratings, atol=1e-9)  # half = a half win each way
    gap = {name: r.ratings[0] - r.ratings[1] for name, r in (("half", half), ("drop", drop), ("nobb", nobb))}
    assert gap["drop"] > gap["nobb"] > gap["half"] > 0  # ties pull the pair together
    with pytest.raises(ValueError, match="unknown ties policy"):
        fit_bradley_terry(counts, ties="ignore")


def test_two_model_closed_form():
    counts = pair_counts_from_arrays(("a", "b"), [0], [1], [30], [10])
    result = fit_bradley_terry(counts)
    assert result.ratings[0] - result.ratings[1] == pytest.approx(ELO_PER_LOGIT * np.log(3.0), abs=1e-9)


def test_disconnected_and_unbeaten_are_reported():
    records = [
        {"model_a": "a", "model_b": "b", "winner": "model_a"},
        {"model_a": "b", "model_b": "a", "winner": "model_a"},
        {"model_a": "c", "model_b": "d", "winner": "model_a"},
        {"model_a": "d", "model_b": "c", "winner": "model_a"},
    ]
    with pytest.raises(ValueError, match="not connected: 2 groups"):
        fit_bradley_terry(aggregate(battles_from_records(records)))
    unbeaten = records[:2] + [
        {"model_a": "champ", "model_b": "a", "winner": "model_a"},
        {"model_a": "b", "model_b": "champ", "winner": "model_b"},
    ]
    counts = aggregate(battles_from_records(unbeaten))
    with pytest.raises(ValueError, match=r"never lost to a model outside their group: champ"):
        fit_bradley_terry(counts)
    with pytest.raises(ValueError, match="champ"):
        bootstrap_bradley_terry(counts, rounds=10, seed=0)
    finite = fit_bradley_terry(counts, prior=0.1)
    assert np.all(np.isfinite(finite.ratings)) and finite.prior == 0.1
    assert finite.rating_of("champ") == max(finite.ratings)
    assert any("prior" in note for note in finite.notes)


def test_bootstrap_drops_degenerate_rounds_and_says_so():
    # A sparse pair: some resamples leave model c without a win; those rounds are dropped and counted.
    counts = pair_counts_from_arrays(("a", "b", "c"), [0, 0, 1], [1, 2, 2], [20, 3, 3], [18, 1, 1])
    boot = bootstrap_bradley_terry(counts, rounds=300, seed=0)
    dropped = 300 - boot.bootstrap_rounds
    assert dropped > 0
    assert any(f"{dropped} of 300 bootstrap rounds" in note for note in boot.notes)


def _golden(path, algorithm):
    with open(path, newline="") as fh:
        return {r["item"]: float(r["score"]) for r in csv.DictReader(fh) if r["algorithm"] == algorithm}


def test_matches_evalica_bradley_terry_on_llmfao(data_dir):
    """evalica 0.4.2 ``bradley_terry`` (ties as half a win, scores normalised); golden file from dustalov/evalica."""
    battles = read_battles(data_dir / "ratings" / "evalica-llmfao.csv")
    assert len(battles) == 8_931
    result = fit_bradley_terry(aggregate(battles))
    golden = _golden(data_dir / "ratings" / "evalica-llmfao-golden.csv", "bradley_terry")
    scores = np.array([golden[m] for m in battles.models])
    assert spearmanr(result.ratings, scores).statistic == pytest.approx(1.0)
    ours = result.order()
    theirs = np.argsort(-scores, kind="stable")
    assert [battles.models[k] for k in ours] == [battles.models[k] for k in theirs]
    # Same model, same scale up to log and centring: evalica's score is exp(theta) normalised.
    log_scores = np.log(scores) - np.log(scores).mean()
    np.testing.assert_allclose((result.ratings - 1000) / ELO_PER_LOGIT, log_scores, atol=1e-6)
