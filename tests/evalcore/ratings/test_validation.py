"""Every ratings function that takes ``level`` (and every count such as ``rounds``) refuses bad values
with a ValueError naming the argument and the value: ``level=95`` (a percent where a fraction belongs)
used to give NaN intervals without a word."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalcore.ratings import (
    StyleControlledResult,
    aggregate,
    bootstrap_bradley_terry,
    fit_bradley_terry,
    fit_style_controlled,
    online_elo,
    simulate_battles,
)
from evalcore.ratings.result import percentile_interval


@pytest.fixture(scope="module")
def battles():
    return simulate_battles(np.array([100.0, 0.0, -100.0]), 600, rng=np.random.default_rng(7))


def _features(battles):
    return np.random.default_rng(1).normal(size=(len(battles), 2))


# Each entry: (name, call(battles, level)); all the public ways to ask a ratings function for a level.
LEVEL_CALLS = [
    ("fit_bradley_terry", lambda b, level: fit_bradley_terry(aggregate(b), level=level)),
    ("bootstrap_bradley_terry", lambda b, level: bootstrap_bradley_terry(aggregate(b), rounds=20, seed=0, level=level)),
    ("online_elo", lambda b, level: online_elo(b, level=level)),
    ("online_elo permutations", lambda b, level: online_elo(b, permutations=5, rng=np.random.default_rng(0), level=level)),
    ("fit_style_controlled sandwich", lambda b, level: fit_style_controlled(b, features=_features(b), level=level)),
    ("fit_style_controlled bootstrap", lambda b, level: fit_style_controlled(b, features=_features(b), rounds=5, seed=0, level=level)),
    ("percentile_interval", lambda b, level: percentile_interval(np.random.default_rng(0).normal(size=(50, 3)), level)),
]  # fmt: skip
BAD_LEVELS = [(95, "got 95"), (0, "got 0"), (1, "got 1"), (1.0, "got 1.0"), (-0.05, "got -0.05"),
              (math.nan, "got nan"), (True, "got True"), ("0.95", "got '0.95'"), (None, "got None")]  # fmt: skip


@pytest.mark.parametrize("name, call", LEVEL_CALLS, ids=[name for name, _ in LEVEL_CALLS])
@pytest.mark.parametrize("level, shown", BAD_LEVELS, ids=[repr(level) for level, _ in BAD_LEVELS])
def test_every_ratings_function_refuses_a_level_outside_0_1(battles, name, call, level, shown):
    with pytest.raises(ValueError, match=rf"^level must be between 0 and 1 \(exclusive\), {shown}$"):
        call(battles, level)


@pytest.mark.parametrize("name, call", LEVEL_CALLS, ids=[name for name, _ in LEVEL_CALLS])
def test_a_fractional_level_is_accepted_and_a_wider_one_gives_wider_intervals(battles, name, call):
    narrow, wide = call(battles, 0.5), call(battles, np.float64(0.99))
    if isinstance(narrow, tuple):  # percentile_interval: (lo, hi)
        narrow_width, wide_width = narrow[1] - narrow[0], wide[1] - wide[0]
    else:
        rated, rated_wide = (r.ratings if isinstance(r, StyleControlledResult) else r for r in (narrow, wide))
        if rated.interval == "none":  # online Elo without permutations has no interval to widen
            assert rated.level == 0.5 and rated_wide.level == 0.99
            return
        narrow_width, wide_width = rated.ci_high - rated.ci_low, rated_wide.ci_high - rated_wide.ci_low
    assert np.all(np.isfinite(wide_width))
    assert np.all(wide_width >= narrow_width) and np.any(wide_width > narrow_width)


COUNT_CALLS = [
    ("rounds", 20.0, "an integer, got 20.0", lambda b, v: bootstrap_bradley_terry(aggregate(b), rounds=v, seed=0)),
    ("rounds", 0, "at least 1, got 0", lambda b, v: bootstrap_bradley_terry(aggregate(b), rounds=v, seed=0)),
    ("rounds", True, "an integer, got True", lambda b, v: fit_style_controlled(b, features=_features(b), rounds=v, seed=0)),
    ("rounds", -1, "at least 0, got -1", lambda b, v: fit_style_controlled(b, features=_features(b), rounds=v)),
    ("permutations", 2.5, "an integer, got 2.5", lambda b, v: online_elo(b, permutations=v, rng=np.random.default_rng(0))),
    ("permutations", -3, "at least 0, got -3", lambda b, v: online_elo(b, permutations=v)),
]  # fmt: skip


@pytest.mark.parametrize("name, value, shown, call", COUNT_CALLS)
def test_counts_must_be_integers(battles, name, value, shown, call):
    with pytest.raises(ValueError, match=rf"^{name} must be {shown}$"):
        call(battles, value)


def test_numpy_integer_counts_are_accepted(battles):
    result = bootstrap_bradley_terry(aggregate(battles), rounds=np.int64(20), seed=0)
    assert result.bootstrap_rounds == 20
    elo = online_elo(battles, permutations=np.int32(4), rng=np.random.default_rng(0))
    assert elo.samples.shape == (4, 3)


PRIOR_CALLS = [
    ("fit_bradley_terry", lambda b, prior: fit_bradley_terry(aggregate(b), prior=prior)),
    ("bootstrap_bradley_terry", lambda b, prior: bootstrap_bradley_terry(aggregate(b), rounds=5, seed=0, prior=prior)),
    ("fit_style_controlled", lambda b, prior: fit_style_controlled(b, features=_features(b), prior=prior)),
]  # fmt: skip
BAD_PRIORS = [(-1.0, "got -1.0"), (math.nan, "got nan"), (math.inf, "got inf"), (True, "got True"), ("0.1", "got '0.1'")]


@pytest.mark.parametrize("name, call", PRIOR_CALLS, ids=[name for name, _ in PRIOR_CALLS])
@pytest.mark.parametrize("prior, shown", BAD_PRIORS, ids=[repr(p) for p, _ in BAD_PRIORS])
def test_every_fit_refuses_a_negative_or_non_finite_prior(battles, name, call, prior, shown):
    # Before, only fit_bradley_terry checked (and only the sign): the bootstrap and the style fit took
    # a NaN prior into every Newton step.
    with pytest.raises(ValueError, match=rf"^prior must be a non-negative finite number, {shown}$"):
        call(battles, prior)


@pytest.mark.parametrize("name, call", PRIOR_CALLS, ids=[name for name, _ in PRIOR_CALLS])
def test_a_zero_or_none_prior_is_the_plain_mle(battles, name, call):
    plain, zero = call(battles, None), call(battles, 0)
    rated = [r.ratings if isinstance(r, StyleControlledResult) else r for r in (plain, zero)]
    np.testing.assert_array_equal(rated[0].ratings, rated[1].ratings)  # the same arithmetic: prior 0 either way
