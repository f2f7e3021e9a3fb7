"""The bootstrap's quick finiteness test (evalcore.ratings.spanning): whenever it says "finite", the exact
check agrees, on sparse random arenas where many resamples have no finite MLE; and the style fit's
intervals are the same with it as with the exact check alone."""

from __future__ import annotations

import numpy as np
import pytest

from evalcore.ratings import style
from evalcore.ratings.battles import Battles
from evalcore.ratings.spanning import TwoWayTree


def arena(rng, m: int, n: int, tie_share: float) -> Battles:
    a = rng.integers(0, m, n)
    b = (a + 1 + rng.integers(0, m - 1, n)) % m
    outcome = np.where(rng.random(n) < tie_share, rng.integers(2, 4, n), rng.integers(0, 2, n)).astype(np.int8)
    styles = rng.integers(0, 400, (n, 4)).astype(float)
    return Battles(tuple(f"m{k}" for k in range(m)), a.astype(np.int32), b.astype(np.int32), outcome,
                   None, styles, styles[::-1].copy())  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_the_quick_test_never_says_finite_when_the_exact_check_does_not(seed):
    rng = np.random.default_rng(seed)
    battles = arena(rng, m=int(rng.integers(2, 9)), n=int(rng.integers(5, 60)), tie_share=float(rng.choice([0.0, 0.1, 0.5])))
    base = (rng.random(len(battles)) < 0.9).astype(float)  # some battles weighed out, as a ties policy does
    tree = TwoWayTree(battles, base)
    agree = quick = 0
    for _ in range(400):
        weights = base * rng.multinomial(len(battles), np.full(len(battles), 1 / len(battles)))
        exact = style._identifiable(battles, weights)
        if tree.holds(weights):
            quick += 1
            assert exact, "the quick test called a resample finite that the exact check refuses"
        agree += exact
    assert quick <= agree


def test_the_quick_test_answers_most_rounds_of_a_dense_arena_and_refuses_a_split_one():
    rng = np.random.default_rng(1)
    battles = arena(rng, m=20, n=3000, tie_share=0.1)
    tree = TwoWayTree(battles, np.ones(len(battles)))
    draws = [rng.multinomial(len(battles), np.full(len(battles), 1 / len(battles))).astype(float) for _ in range(50)]
    assert tree.spans and all(tree.holds(w) for w in draws)  # its tree: the pairs with most battles each way
    a, b = np.array([0, 1, 2, 3] * 5, np.int32), np.array([1, 0, 3, 2] * 5, np.int32)  # w, x meet; y, z meet
    split = Battles(("w", "x", "y", "z"), a, b, np.zeros(20, np.int8))  # each pair beat each other: two groups
    assert not TwoWayTree(split, np.ones(20)).spans and not style._identifiable(split, np.ones(20))
    one_way = Battles(("x", "y"), np.zeros(5, np.int32), np.ones(5, np.int32), np.zeros(5, np.int8))
    assert not TwoWayTree(one_way, np.ones(5)).spans  # x always won: no pair both ways


def test_style_intervals_are_the_same_with_the_quick_test(monkeypatch):
    rng = np.random.default_rng(4)
    battles = arena(rng, m=6, n=60, tie_share=0.1)  # sparse: some rounds are dropped
    fast = style.fit_style_controlled(battles, rounds=200, seed=3)
    monkeypatch.setattr(style.TwoWayTree, "holds", lambda self, weights: False)
    exact = style.fit_style_controlled(battles, rounds=200, seed=3)
    assert any("left out" in note for note in exact.ratings.notes)  # the exact check did drop rounds
    for field in ("ratings", "ci_low", "ci_high"):
        assert np.array_equal(getattr(fast.ratings, field), getattr(exact.ratings, field))
    assert np.array_equal(fast.coef_ci_low, exact.coef_ci_low) and fast.ratings.notes == exact.ratings.notes
