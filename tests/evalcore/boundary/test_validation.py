"""The stats functions' boundary: ``level`` (and a test's ``alpha`` and ``power``) strictly between 0 and
1, counts (pass@k's ``n``, ``c``, ``k``; sample sizes; bootstrap rounds) integers. Each bad value is a
ValueError naming the argument and the value (``level=95`` gave NaN intervals before)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalcore.boundary.validation import check_integer, check_probability, integer_array
from evalcore.stats import (
    best_of_k_inflation,
    expected_max_standard_normal,
    mean_interval,
    paired_bootstrap_difference,
    pass_at_k,
    power_for_sample_size,
    required_sample_size,
)

VALUES = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0])
OTHER = np.array([0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])

# (argument name, call(value)): every stats function that takes a probability-like argument.
PROBABILITY_CALLS = [
    ("level", lambda v: mean_interval(VALUES, level=v)),
    ("level", lambda v: mean_interval(VALUES, level=v, method="wilson")),
    ("level", lambda v: mean_interval(VALUES, level=v, method="bootstrap", rounds=50, rng=np.random.default_rng(0))),
    ("level", lambda v: paired_bootstrap_difference(VALUES, OTHER, level=v, rounds=50, rng=np.random.default_rng(0))),
    ("alpha", lambda v: required_sample_size(0.02, p=0.7, alpha=v)),
    ("power", lambda v: required_sample_size(0.02, p=0.7, power=v)),
    ("alpha", lambda v: power_for_sample_size(500, 0.02, p=0.7, alpha=v)),
]  # fmt: skip
BAD_PROBABILITIES = [(95, "95"), (0, "0"), (1.0, "1.0"), (-0.1, "-0.1"), (math.nan, "nan"), (True, "True"),
                     ("0.95", "'0.95'"), (None, "None")]  # fmt: skip


@pytest.mark.parametrize("name, call", PROBABILITY_CALLS)
@pytest.mark.parametrize("value, shown", BAD_PROBABILITIES, ids=[repr(v) for v, _ in BAD_PROBABILITIES])
def test_probabilities_must_lie_strictly_between_0_and_1(name, call, value, shown):
    with pytest.raises(ValueError, match=rf"^{name} must be between 0 and 1 \(exclusive\), got {shown}$"):
        call(value)


@pytest.mark.parametrize("method", ["normal", "wilson", "bootstrap"])
def test_a_fractional_level_gives_a_finite_interval_that_widens_with_the_level(method):
    def width(level):
        interval = mean_interval(VALUES, level=level, method=method, rounds=2000, rng=np.random.default_rng(0))
        assert interval.level == level
        return interval.ci_high - interval.ci_low

    assert 0 < width(0.5) < width(np.float32(0.99)) < math.inf


# (argument name, value, expected tail of the message, call(value))
COUNT_CALLS = [
    ("n", 10.0, "an integer, got 10.0", lambda v: pass_at_k(v, 3, 1)),
    ("n", True, "an integer, got True", lambda v: pass_at_k(v, 0, 1)),
    ("n", [10, 10.5], "integers, got 10.5", lambda v: pass_at_k(v, 3, 1)),
    ("n", [10, True], "integers, got True", lambda v: pass_at_k(v, 0, 1)),
    ("n", np.array([10.0, 12.0]), "integers, got 10.0", lambda v: pass_at_k(v, 3, 1)),
    ("n", "10", "an integer, got '10'", lambda v: pass_at_k(v, 3, 1)),
    ("c", 3.0, "an integer, got 3.0", lambda v: pass_at_k(10, v, 1)),
    ("c", np.array([True, False]), "integers, got True", lambda v: pass_at_k(10, v, 1)),
    ("k", 1.0, "an integer, got 1.0", lambda v: pass_at_k(10, 3, v)),
    ("k", False, "an integer, got False", lambda v: pass_at_k(10, 3, v)),
    ("k", 0, "at least 1, got 0", lambda v: pass_at_k(10, 3, v)),
    ("n", 100.0, "an integer, got 100.0", lambda v: power_for_sample_size(v, 0.02, p=0.7)),
    ("n", 0, "at least 1, got 0", lambda v: power_for_sample_size(v, 0.02, p=0.7)),
    ("k", 2.5, "an integer, got 2.5", lambda v: expected_max_standard_normal(v)),
    ("k", 2.5, "an integer, got 2.5", lambda v: best_of_k_inflation(v, se=0.01)),
    ("n", 500.0, "an integer, got 500.0", lambda v: best_of_k_inflation(3, p=0.7, n=v)),
    ("rounds", 50.0, "an integer, got 50.0", lambda v: mean_interval(VALUES, method="bootstrap", rounds=v, rng=np.random.default_rng(0))),
    ("rounds", 0, "at least 1, got 0", lambda v: paired_bootstrap_difference(VALUES, OTHER, rounds=v, rng=np.random.default_rng(0))),
]  # fmt: skip


@pytest.mark.parametrize("name, value, tail, call", COUNT_CALLS)
def test_counts_must_be_integers(name, value, tail, call):
    with pytest.raises(ValueError, match=rf"^{name} must be {tail}$"):
        call(value)


def test_numpy_integers_are_counts_like_any_other():
    assert pass_at_k(np.int64(10), np.int32(3), np.int64(1)) == pytest.approx(0.3)
    got = pass_at_k(np.array([10, 20], dtype=np.uint16), [3, np.int64(0)], 2)
    np.testing.assert_allclose(got, [1 - 21 / 45, 0.0])
    assert power_for_sample_size(np.int64(500), 0.05, p=0.7) == power_for_sample_size(500, 0.05, p=0.7) > 0
    assert best_of_k_inflation(np.int64(2), se=1.0).max_z == pytest.approx(1 / math.sqrt(math.pi), abs=1e-6)


def test_the_helpers_return_plain_python_values():
    assert check_probability(np.float32(0.5), "alpha") == 0.5 and type(check_probability(0.9)) is float
    assert check_integer(np.int16(7), "n", minimum=7) == 7 and type(check_integer(np.int16(7), "n")) is int
    arr = integer_array([[1, 2], [3, np.int64(4)]], "n")
    assert arr.dtype == np.int64 and arr.tolist() == [[1, 2], [3, 4]]
    assert integer_array(np.array(5, dtype=np.int8), "n").dtype == np.int64
