"""Which benchmark a run's task belongs to, the metric the board shows for it, and its random baseline.

A suite runs leaf tasks (``mmlu_anatomy``, ``bbh_cot_fewshot_snarks``, ``gsm8k``); the board shows one
column per benchmark, the micro average of its leaf tasks (weights: documents), as the engine
aggregates groups.

**Normalised scores** rescale each leaf task between its random baseline and 100:
``(score - baseline) / (1 - baseline) * 100`` (0 = guessing, 100 = every document right; below 0 =
worse than guessing), then average like the raw scores (the Open LLM Leaderboard's normalisation).
Baselines:

- MMLU (letter, cloze and hybrid styles): 0.25 (four options).
- GSM8K, HumanEval: 0 (free-form answers: guessing scores nothing).
- BBH: per task, the accuracy of a uniform guess among each document's options, averaged over the
  task's 250 documents in the bundled data (``(A)``...``(R)`` options counted per document;
  True/False, Yes/No and valid/invalid answers are 2 options); free-form tasks (``dyck_languages``,
  ``multistep_arithmetic_two``, ``object_counting``, ``word_sorting``) 0.
- Any other task: 0, so its normalised score is its raw score times 100. Its column shows the first
  of :data:`PREFERRED_METRICS` the run reported (a task with none of them is not on the board).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

BBH_BASELINES = {
    "boolean_expressions": 0.5, "causal_judgement": 0.5, "date_understanding": 0.1717,
    "disambiguation_qa": 0.3323, "dyck_languages": 0.0, "formal_fallacies": 0.5, "geometric_shapes": 0.0982,
    "hyperbaton": 0.5, "logical_deduction_five_objects": 0.2, "logical_deduction_seven_objects": 0.1429,
    "logical_deduction_three_objects": 0.3333, "movie_recommendation": 0.2462, "multistep_arithmetic_two": 0.0,
    "navigate": 0.5, "object_counting": 0.0, "penguins_in_a_table": 0.2003,
    "reasoning_about_colored_objects": 0.1211, "ruin_names": 0.2493, "salient_translation_error_detection": 0.1667,
    "snarks": 0.5028, "sports_understanding": 0.5, "temporal_sequences": 0.25,
    "tracking_shuffled_objects_five_objects": 0.2, "tracking_shuffled_objects_seven_objects": 0.1429,
    "tracking_shuffled_objects_three_objects": 0.3333, "web_of_lies": 0.5, "word_sorting": 0.0,
}  # fmt: skip


@dataclass(frozen=True)
class Benchmark:
    key: str
    label: str
    pattern: str  # a regular expression over leaf task names
    metric: str  # the Score.metric the board shows
    baseline: float = 0.0

    def matches(self, task: str) -> bool:
        return re.fullmatch(self.pattern, task) is not None


BENCHMARKS = (
    Benchmark("mmlu", "MMLU", r"mmlu_(?!cloze_|hybrid_)\w+", "acc", 0.25),
    Benchmark("mmlu_cloze", "MMLU (cloze)", r"mmlu_cloze_\w+", "acc_norm", 0.25),
    Benchmark("mmlu_hybrid", "MMLU (hybrid)", r"mmlu_hybrid_\w+", "acc", 0.25),
    Benchmark("bbh", "BBH", r"bbh_cot_fewshot_\w+", "exact_match,get-answer"),
    Benchmark("gsm8k", "GSM8K", r"gsm8k", "exact_match,strict-match"),
    Benchmark("humaneval", "HumanEval", r"humaneval", "pass@1"),
)
ORDER = {b.key: i for i, b in enumerate(BENCHMARKS)}
# For tasks outside the table: the first of these metrics the run reported.
PREFERRED_METRICS = ("acc_norm", "acc", "exact_match", "exact_match,strict-match", "pass@1", "f1")


@lru_cache(maxsize=4096)
def benchmark_for(task: str) -> Benchmark | None:
    for benchmark in BENCHMARKS:
        if benchmark.matches(task):
            return benchmark
    return None


def benchmark_key(task: str) -> str:
    found = benchmark_for(task)
    return found.key if found else task


def benchmark_label(key: str) -> str:
    for benchmark in BENCHMARKS:
        if benchmark.key == key:
            return benchmark.label
    return key


def headline_metric(task: str, available: list[str] | tuple[str, ...] = ()) -> str | None:
    """The metric the board shows for ``task``: the table's, else the first preferred one reported."""
    found = benchmark_for(task)
    if found is not None:
        return found.metric
    for name in PREFERRED_METRICS:
        if name in available:
            return name
    return None


@lru_cache(maxsize=4096)
def task_baseline(task: str) -> float:
    """The random-guess score of ``task`` (0..1)."""
    if task.startswith("bbh_cot_fewshot_"):
        return BBH_BASELINES.get(task.removeprefix("bbh_cot_fewshot_"), 0.0)
    found = benchmark_for(task)
    return found.baseline if found else 0.0


def normalise(value: float | None, baseline: float) -> float | None:
    """``value`` (0..1) on the 0-100 scale between the random ``baseline`` and a perfect score."""
    if value is None or not math.isfinite(value):
        return None
    return (value - baseline) / (1.0 - baseline) * 100.0


def board_metrics() -> set[str]:
    """Every metric name the board may show (what the table's query reads)."""
    return {b.metric for b in BENCHMARKS} | set(PREFERRED_METRICS)


def benchmark_sort_key(key: str) -> tuple:
    return (ORDER.get(key, len(ORDER)), key)
