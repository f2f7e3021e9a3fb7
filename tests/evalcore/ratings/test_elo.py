"""Online Elo: its order dependence (issue 3 simulation) and agreement with evalica's golden Elo."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from evalcore.ratings import (
    aggregate,
    battles_from_records,
    fit_bradley_terry,
    read_battles,
    simulate_battles,
)
from evalcore.ratings.elo import elo_permutation_study, elo_ratings, online_elo

TRUE_SIX = np.array([174.0, 104.0, 52.0, 0.0, -69.0, -261.0])


@pytest.fixture(scope="module")
def six_model_votes():
    return simulate_battles(TRUE_SIX, 24_936, rng=np.random.default_rng(2024))


def test_elo_order_dependence_vs_bt(six_model_votes):
    """Seed's figures: BT ~4 RMS, zero spread; Elo K=32 ~50 RMS, ~43 spread; K=4 in between."""
    rms = {}
    spread = {}
    for k in (32.0, 4.0):
        runs = elo_permutation_study(six_model_votes, permutations=40, rng=np.random.default_rng(0), k=k)
        rms[k] = float(np.sqrt(np.mean((runs - 1000.0 - TRUE_SIX) ** 2)))
        spread[k] = float(runs.std(axis=0).mean())
    bt = fit_bradley_terry(aggregate(six_model_votes))
    bt_rms = float(np.sqrt(np.mean((bt.ratings - 1000.0 - TRUE_SIX) ** 2)))
    assert 35 < rms[32.0] < 70
    assert 30 < spread[32.0] < 65
    assert bt_rms < rms[4.0] < rms[32.0]
    assert 5 < spread[4.0] < spread[32.0]


def test_online_elo_result_and_tstamp_order():
    records = [
        {"model_a": "a", "model_b": "b", "winner": "model_a", "tstamp": 2},
        {"model_a": "a", "model_b": "b", "winner": "model_b", "tstamp": 1},
        {"model_a": "a", "model_b": "b", "winner": "tie", "tstamp": 3},
    ]
    battles = battles_from_records(records)
    result = online_elo(battles, k=32)
    # Replayed by tstamp: b wins (+16 to b), then a wins, then a tie.
    r = [1000.0, 1000.0]
    for s in (0.0, 1.0, 0.5):
        e = 1 / (1 + 10 ** ((r[1] - r[0]) / 400))
        r = [r[0] + 32 * (s - e), r[1] - 32 * (s - e)]
    np.testing.assert_allclose(result.ratings, r)
    assert result.method == "elo" and result.interval == "none"
    dropped = online_elo(battles, k=32, ties="drop")
    assert dropped.ratings[0] != result.ratings[0]
    spread = online_elo(battles, k=32, permutations=20, rng=np.random.default_rng(0))
    assert spread.interval == "permutation" and spread.samples.shape == (20, 2)
    with pytest.raises(ValueError, match="rng is required"):
        online_elo(battles, permutations=5)


def test_matches_evalica_elo_on_llmfao(data_dir):
    """evalica 0.4.2 ``elo`` defaults: K=4, base 10, scale 400, initial 1000, ties half, file order."""
    battles = read_battles(data_dir / "ratings" / "evalica-llmfao.csv")
    ours = elo_ratings(battles, k=4.0)
    with open(data_dir / "ratings" / "evalica-llmfao-golden.csv", newline="") as fh:
        golden = {r["item"]: float(r["score"]) for r in csv.DictReader(fh) if r["algorithm"] == "elo"}
    np.testing.assert_allclose(ours, [golden[m] for m in battles.models], atol=1e-6)


def test_a_continued_replay_is_bit_for_bit_the_full_replay(six_model_votes):
    """Replaying the first votes, then the rest from those ratings (``start``, ``skip``), gives exactly
    the full replay's numbers: what lets the arena's refit keep Elo's state between refits."""
    votes = six_model_votes
    full = elo_ratings(votes, k=4.0)
    for cut in (1, 777, len(votes) // 2, len(votes) - 1, len(votes)):
        head = type(votes)(votes.models, votes.model_a[:cut], votes.model_b[:cut], votes.outcome[:cut])
        start = elo_ratings(head, k=4.0)
        assert np.array_equal(elo_ratings(votes, k=4.0, start=start, skip=cut), full)
        assert np.array_equal(online_elo(votes, start=start, skip=cut).ratings, full)
    assert np.array_equal(elo_ratings(votes, k=4.0, start=np.full(votes.n_models, 1000.0)), full)


def test_a_continued_replay_refuses_what_it_cannot_continue(six_model_votes):
    votes = six_model_votes
    start = np.full(votes.n_models, 1000.0)
    with pytest.raises(ValueError, match="skip needs start"):
        elo_ratings(votes, skip=10)
    with pytest.raises(ValueError, match="skip needs start"):
        elo_ratings(votes, start=start, skip=len(votes) + 1)
    with pytest.raises(ValueError, match="skip needs start"):
        elo_ratings(votes, start=start, skip=5, order=np.arange(len(votes))[::-1].copy())
    shuffled = type(votes)(
        votes.models, votes.model_a, votes.model_b, votes.outcome, tstamp=-np.arange(len(votes), dtype=float)
    )
    with pytest.raises(ValueError, match="skip needs start"):
        elo_ratings(shuffled, start=start, skip=5)
    with pytest.raises(ValueError, match="finite ratings"):
        elo_ratings(votes, start=np.full(votes.n_models - 1, 1000.0))
    with pytest.raises(ValueError, match="finite ratings"):
        elo_ratings(votes, start=np.array([np.nan] * votes.n_models))
    with pytest.raises(ValueError, match="skip"):
        elo_ratings(votes, start=start, skip=-1)
