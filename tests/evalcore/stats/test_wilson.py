"""Wilson intervals for accuracies: agree with SciPy's, and never collapse at 0% or 100%."""

import numpy as np
import pytest
from scipy.stats import binomtest

from evalcore.engine.metrics import mean_value
from evalcore.stats.intervals import mean_interval


@pytest.mark.parametrize(("k", "n"), [(0, 4), (4, 4), (7, 10), (81, 263), (1, 1000)])
def test_wilson_matches_scipy(k, n):
    values = np.array([1.0] * k + [0.0] * (n - k))
    ours = mean_interval(values, method="wilson")
    theirs = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert ours.ci_low == pytest.approx(theirs.low, abs=1e-12)
    assert ours.ci_high == pytest.approx(theirs.high, abs=1e-12)


def test_accuracy_intervals_do_not_collapse_at_the_edges():
    none_right = mean_value([0, 0, 0, 0])
    assert none_right.value == 0 and none_right.ci_low == 0 and none_right.ci_high > 0.45
    assert none_right.interval == "mid-p"  # the engine's proportions: tests/evalcore/stats/test_estimates.py
    all_right = mean_value([1, 1, 1, 1])
    assert all_right.ci_high == 1 and all_right.ci_low < 0.55


def test_non_binary_metrics_keep_the_t_interval():
    assert mean_value([0.5, 0.25, 1.0]).interval == "t"  # an unnamed metric: not known to be bounded
    with pytest.raises(ValueError, match="0/1 values"):
        mean_interval(np.array([0.5, 1.0]), method="wilson")
