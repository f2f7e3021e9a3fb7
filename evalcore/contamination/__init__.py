"""Contamination checks: n-gram overlap with a corpus, a memorisation probe, an exchangeability test.

Plain functions returning frozen dataclasses, for the command line (``python -m evalcore
contamination ...``) and for the site:

- :func:`scan_corpus` / :func:`scan_items` and :func:`write_scan`: which benchmark items occur in a
  training corpus (13-gram overlap, GPT-3 style); a floor on contamination, not a proof;
- :func:`memorisation_probe`: does the model complete the second half of items verbatim, on the test
  split against the train split as a control;
- :func:`exchangeability_test`: does the model prefer a benchmark shard in its published order
  (Oren et al., 2024).
"""

from evalcore.contamination.exchangeability import (
    ExchangeabilityResult,
    exchangeability_test,
    shard_documents,
)
from evalcore.contamination.items import BenchmarkItem, benchmark_items, normalise, words
from evalcore.contamination.probe import ProbeRecord, ProbeResult, SplitRate, memorisation_probe
from evalcore.contamination.scan import (
    ItemMatch,
    ScanResult,
    TaskSummary,
    scan_corpus,
    scan_items,
    write_scan,
)

__all__ = [
    "BenchmarkItem",
    "ExchangeabilityResult",
    "ItemMatch",
    "ProbeRecord",
    "ProbeResult",
    "ScanResult",
    "SplitRate",
    "TaskSummary",
    "benchmark_items",
    "exchangeability_test",
    "memorisation_probe",
    "normalise",
    "scan_corpus",
    "scan_items",
    "shard_documents",
    "words",
    "write_scan",
]
