"""Pair sampling: frequencies follow the weights, never a model against itself or its family."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy import stats

from arena.play.sampling import Candidate, pair_weights, sample_pair


def draw(candidates, n, **options):
    rng = np.random.default_rng(7)
    return [sample_pair(candidates, rng=rng, **options) for _ in range(n)]


def test_pair_frequencies_match_weights_within_sampling_error():
    candidates = [Candidate("a", 1.0), Candidate("b", 2.0), Candidate("c", 3.0), Candidate("d", 0.5)]
    n = 12_000
    draws = draw(candidates, n)
    observed = Counter(frozenset((left.key, right.key)) for left, right in draws)
    i, j, weight = pair_weights(candidates)
    expected = {frozenset((candidates[a].key, candidates[b].key)): w for a, b, w in zip(i, j, weight / weight.sum())}
    keys = sorted(expected, key=sorted)
    chi2 = stats.chisquare([observed[k] for k in keys], [expected[k] * n for k in keys])
    assert chi2.pvalue > 0.001, (observed, expected)


def test_never_the_same_model_and_sides_are_a_fair_coin():
    candidates = [Candidate("a", 1.0), Candidate("b", 1.0)]
    draws = draw(candidates, 4000)
    assert all(left.key != right.key for left, right in draws)
    left_is_a = sum(left.key == "a" for left, _ in draws)
    assert stats.binomtest(left_is_a, 4000, 0.5).pvalue > 0.001


def test_two_models_of_one_family_never_meet():
    candidates = [Candidate("a1", 1, "fam"), Candidate("a2", 1, "fam"), Candidate("b", 1, "other"), Candidate("c", 1)]
    pairs = {frozenset((left.key, right.key)) for left, right in draw(candidates, 3000)}
    assert frozenset(("a1", "a2")) not in pairs
    assert len(pairs) == 5


def test_new_models_are_boosted_until_they_have_enough_votes():
    veteran = [Candidate("v1", 1, votes=1000), Candidate("v2", 1, votes=1000)]
    newcomer = Candidate("new", 1, votes=10)
    plain = Counter(k for pair in draw([*veteran, newcomer], 6000) for k in (pair[0].key, pair[1].key))
    boosted = Counter(
        k
        for pair in draw([*veteran, newcomer], 6000, new_model_votes=300, boost=4.0)
        for k in (pair[0].key, pair[1].key)
    )
    # plain: the newcomer is in 2/3 of the pairs; boosted 4x: in (4+4)/(4+4+1) = 8/9 of them.
    assert abs(plain["new"] / 6000 - 2 / 3) < 0.03
    assert abs(boosted["new"] / 6000 - 8 / 9) < 0.03


@pytest.mark.parametrize(
    "candidates",
    [[], [Candidate("a", 1)], [Candidate("a", 1, "f"), Candidate("b", 1, "f")], [Candidate("a", 0), Candidate("b", 0)]],
)
def test_no_allowed_pair_is_a_clear_error(candidates):
    with pytest.raises(ValueError, match="at least two models"):
        sample_pair(candidates, rng=np.random.default_rng(0))


def test_bad_weights_are_refused():
    with pytest.raises(ValueError, match="finite and not negative"):
        sample_pair([Candidate("a", -1), Candidate("b", 1)], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="finite"):
        sample_pair([Candidate("a", float("nan")), Candidate("b", 1)], rng=np.random.default_rng(0))
