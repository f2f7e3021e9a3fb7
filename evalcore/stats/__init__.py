"""Statistics for benchmark scores: intervals, paired differences, clustered errors, pass@k, power."""

from evalcore.stats.intervals import (
    ClusteredSE,
    MeanInterval,
    PairedDifference,
    clustered_standard_error,
    mean_interval,
    paired_bootstrap_difference,
    subset_difference,
)
from evalcore.stats.passk import pass_at_k
from evalcore.stats.power import (
    BestOfKInflation,
    SampleSize,
    best_of_k_inflation,
    expected_max_standard_normal,
    power_for_sample_size,
    required_sample_size,
)

__all__ = [
    "BestOfKInflation",
    "ClusteredSE",
    "MeanInterval",
    "PairedDifference",
    "SampleSize",
    "best_of_k_inflation",
    "clustered_standard_error",
    "expected_max_standard_normal",
    "mean_interval",
    "paired_bootstrap_difference",
    "pass_at_k",
    "power_for_sample_size",
    "required_sample_size",
    "subset_difference",
]
