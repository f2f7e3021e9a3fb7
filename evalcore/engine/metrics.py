"""Per-document metrics and their aggregation with standard errors and 95% intervals.

Scoring rules (each a pure function of stored responses, so re-scoring needs no model):

- multiple choice: ``acc`` (argmax log-likelihood), ``acc_norm`` (log-likelihood divided by the
  choice's UTF-8 byte length; equal to the harness's character-length rule for ASCII choices),
  ``acc_mutual_info`` (conditional minus unconditional log-likelihood), ``brier_score`` (squared
  error of the softmax over choices, lower is better), ``exact_match`` (the gold choice is the
  greedy continuation);
- generation: ``exact_match`` (``ignore_case``, ``ignore_punctuation``, ``ignore_numbers``,
  ``regexes_to_ignore``, applied in the harness's order), ``f1`` (DROP/SQuAD bag-of-words F1,
  see :mod:`evalcore.engine.textnorm`), ``pass@k`` (unbiased estimator over executed samples);
- rolling log-likelihood: ``word_perplexity``, ``byte_perplexity``, ``bits_per_byte``,
  ``token_perplexity`` (ratios of sums over documents).

Means get ``stderr = sd(ddof=1) / sqrt(n)`` and a 95% t interval (:mod:`evalcore.stats`); ratio metrics
(perplexities, bits per byte) get a seeded percentile bootstrap over documents.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass

import numpy as np

from evalcore.stats import passk
from evalcore.stats.intervals import mean_interval
from evalcore.validation import check_integer

Z95 = 1.959963984540054
BOOTSTRAP_ROUNDS = 1000

METRICS_BY_TYPE = {
    "multiple_choice": {"acc", "acc_norm", "acc_bytes", "acc_mutual_info", "brier_score", "exact_match", "f1", "mcc"},
    "loglikelihood": {"acc", "perplexity"},
    "loglikelihood_rolling": {"word_perplexity", "byte_perplexity", "bits_per_byte", "token_perplexity"},
    "generate_until": {"exact_match", "f1", "pass@k", "acc", "bleu", "chrf", "ter"},
}
# Metrics scored over the whole corpus of (gold, prediction) pairs (:mod:`evalcore.engine.corpus`).
CORPUS_AGGREGATIONS = {"f1", "matthews_corrcoef", "bleu", "chrf", "ter"}
DEFAULT_AGGREGATION = {"mcc": "matthews_corrcoef", "bleu": "bleu", "chrf": "chrf", "ter": "ter"}
MC_DEFAULT_AGGREGATION = {"f1": "f1", "mcc": "matthews_corrcoef"}
DEFAULT_METRICS = {
    "multiple_choice": ["acc", "acc_norm"],
    "loglikelihood": ["perplexity", "acc"],
    "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
    "generate_until": ["exact_match"],
}
LOWER_IS_BETTER = {"ter", "brier_score", "perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte", "token_perplexity"}
RATIO_METRICS = {"perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte", "token_perplexity"}
METRIC_OPTIONS = {
    "exact_match": {"ignore_case", "ignore_punctuation", "ignore_numbers", "regexes_to_ignore"},
    "pass@k": {"k", "timeout", "memory_mb", "entry_point", "setup"},
}
STRICT_OPTIONS = {"exact_match", "pass@k"}
ENTRY_KEYS = {"metric", "aggregation", "higher_is_better", "hf_evaluate"}
AGGREGATIONS = {"mean", "median", "perplexity", "weighted_perplexity", "bits_per_byte", "brier_score"} | CORPUS_AGGREGATIONS


def validate_metric_list(metric_list, output_type: str, source: str, *, custom_results: bool = False) -> None:
    if metric_list is None:
        return
    if not isinstance(metric_list, list) or not metric_list:
        raise ValueError(f"{source}: metric_list must be a non-empty list of {{metric: NAME, ...}}")
    allowed = METRICS_BY_TYPE[output_type]
    for entry in metric_list:
        if not isinstance(entry, dict) or "metric" not in entry:
            raise ValueError(f"{source}: each metric_list entry needs 'metric'")
        name = entry["metric"]
        if callable(name) or custom_results:
            # Python code scores these (a trusted task's process_results or metric function).
            if not (isinstance(name, str) or callable(name)):
                raise ValueError(f"{source}: metric {name!r} must be a name or !function")
            aggregation = entry.get("aggregation", "mean")
            if not callable(aggregation) and (not isinstance(aggregation, str) or aggregation not in AGGREGATIONS):
                raise ValueError(f"{source}: aggregation {aggregation!r} is not one of {sorted(AGGREGATIONS)}")
            continue
        if not isinstance(name, str) or name not in allowed:
            raise ValueError(f"{source}: metric {name!r} is not available for {output_type}; choose from {sorted(allowed)}")
        bad = sorted(set(entry) - ENTRY_KEYS - METRIC_OPTIONS.get(name, set()))
        if bad and name in STRICT_OPTIONS:
            # Other metrics ignore extra options, as the harness's passthrough metrics do.
            raise ValueError(f"{source}: metric {name!r} does not take {bad}")
        aggregation = entry.get("aggregation", "mean")
        if not callable(aggregation) and (not isinstance(aggregation, str) or aggregation not in AGGREGATIONS):
            raise ValueError(f"{source}: aggregation {entry['aggregation']!r} is not one of {sorted(AGGREGATIONS)}")
        if name == "pass@k":
            ks = entry.get("k", [1])
            for k in ks if isinstance(ks, list) else [ks]:
                check_integer(k, f"{source}: pass@k's k", minimum=1)
            for option in ("entry_point", "setup"):
                if option in entry and not isinstance(entry[option], str):
                    raise ValueError(f"{source}: pass@k's {option} must be a template string, not {entry[option]!r}")
            if "setup" in entry and "entry_point" not in entry:
                raise ValueError(
                    f"{source}: pass@k's setup needs entry_point too (the names the tests take from the candidate): "
                    "else the setup's stubs would stand in for the candidate's functions"
                )


def metric_entries(config) -> list[dict]:
    entries = config.get("metric_list") or [{"metric": m} for m in DEFAULT_METRICS[config.output_type]]
    return [dict(e) for e in entries]


# -- text metrics ----------------------------------------------------------------------------------
_PUNCT_TABLE = str.maketrans("", "", string.punctuation)


def exact_match(prediction: str, reference: str, *, ignore_case=False, ignore_punctuation=False,
                ignore_numbers=False, regexes_to_ignore=()) -> float:  # fmt: skip
    """1.0 when the normalised strings are equal (harness order: regexes, case, punctuation, digits)."""
    prediction, reference = str(prediction), str(reference)
    for pattern in regexes_to_ignore or ():
        prediction = re.sub(pattern, "", prediction)
        reference = re.sub(pattern, "", reference)
    if ignore_case:
        prediction, reference = prediction.lower(), reference.lower()
    if ignore_punctuation:
        prediction, reference = prediction.translate(_PUNCT_TABLE), reference.translate(_PUNCT_TABLE)
    if ignore_numbers:
        digits = str.maketrans("", "", string.digits)
        prediction, reference = prediction.translate(digits), reference.translate(digits)
    return float(prediction == reference)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k) (Chen et al., 2021)."""
    n, c, k = check_integer(n, "n"), check_integer(c, "c"), check_integer(k, "k")
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"pass@k needs 0 <= c <= n and k >= 1 (got n={n}, c={c}, k={k})")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}: raise repeats")
    return float(passk.pass_at_k(n, c, k))


# -- multiple choice -------------------------------------------------------------------------------
def multiple_choice_scores(logprobs, choices, gold, *, greedy=None, unconditional=None) -> dict[str, float]:
    """All multiple-choice metrics for one document.

    Parameters
    ----------
    logprobs : array of shape (n_choices,)
        log P(target_delimiter + choice | context).
    choices : list of str, length n_choices
    gold : int or list of int
        Index (or indices) of the correct choice(s).
    greedy : array of bool, shape (n_choices,), optional
    unconditional : array of shape (n_choices,), optional
        log P(target_delimiter + choice) with an empty context, for ``acc_mutual_info``.
    """
    lls = np.asarray(logprobs, dtype=float)
    golds = gold if isinstance(gold, list) else [gold]
    byte_len = np.array([max(len(c.encode("utf-8")), 1) for c in choices], dtype=float)
    scores = {
        "acc": float(int(np.argmax(lls)) in golds),
        "acc_norm": float(int(np.argmax(lls / byte_len)) in golds),
        "acc_bytes": float(int(np.argmax(lls / byte_len)) in golds),
    }
    shifted = np.exp(lls - lls.max())
    probs = shifted / shifted.sum()
    one_hot = np.zeros_like(probs)
    one_hot[golds[0]] = 1.0
    scores["brier_score"] = float(np.sum((probs - one_hot) ** 2))
    if greedy is not None:
        scores["exact_match"] = float(any(bool(greedy[g]) for g in golds))
    if unconditional is not None:
        scores["acc_mutual_info"] = float(int(np.argmax(lls - np.asarray(unconditional, dtype=float))) in golds)
    return scores


# -- aggregation -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricValue:
    """A reported number: value, standard error, 95% interval, and how many items it covers."""

    value: float
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    higher_is_better: bool
    interval: str = "normal"

    def as_dict(self) -> dict:
        return {
            "value": self.value,
            "stderr": self.stderr,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
            "higher_is_better": self.higher_is_better,
            "interval": self.interval,
        }


def clean(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


_clean = clean


def mean_value(values, *, higher_is_better: bool = True) -> MetricValue:
    """Mean of per-item values (shape (n,)) with stderr sd(ddof=1)/sqrt(n) and a 95% interval.

    The interval is :func:`evalcore.stats.intervals.mean_interval`, the platform's one implementation:
    Wilson's score interval when every value is 0 or 1 (accuracies), else Student's t with n - 1 degrees
    of freedom.
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("cannot aggregate a metric over zero items")
    if values.size == 1:
        return MetricValue(float(values[0]), None, None, None, 1, higher_is_better)
    # A proportion (every value 0 or 1) gets the Wilson interval, which stays honest at 0% and 100%.
    method = "wilson" if np.isin(values, (0.0, 1.0)).all() else "normal"
    interval = mean_interval(values, level=0.95, method=method)
    return MetricValue(
        interval.mean, _clean(interval.se), _clean(interval.ci_low), _clean(interval.ci_high), int(values.size),
        higher_is_better, interval=method,
    )  # fmt: skip


def ratio_statistic(name: str, numerators: np.ndarray, denominators: np.ndarray) -> float:
    """Perplexity-style metric from summed log-likelihoods (numerators) and unit counts."""
    total_ll, total_units = float(np.sum(numerators)), float(np.sum(denominators))
    if total_units <= 0:
        return float("nan")
    if name == "bits_per_byte":
        return -total_ll / total_units / math.log(2)
    return math.exp(-total_ll / total_units)


def ratio_value(name: str, numerators, denominators, *, seed: int = 0) -> MetricValue:
    """A ratio metric with a percentile-bootstrap 95% interval over documents."""
    numerators, denominators = np.asarray(numerators, float), np.asarray(denominators, float)
    n = numerators.size
    if n == 0:
        raise ValueError("cannot aggregate a metric over zero items")
    value = ratio_statistic(name, numerators, denominators)
    if n < 2:
        return MetricValue(value, None, None, None, n, False, "bootstrap")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(BOOTSTRAP_ROUNDS, n))
    stats = np.array([ratio_statistic(name, numerators[d], denominators[d]) for d in draws])
    low, high = np.percentile(stats, [2.5, 97.5])
    return MetricValue(value, _clean(float(stats.std(ddof=1))), _clean(low), _clean(high), n, False, "bootstrap")


def group_value(parts: list[MetricValue], *, weight_by_size: bool) -> MetricValue:
    """Aggregate task means: micro (weighted by n) or macro; independent-task standard error."""
    if not parts:
        raise ValueError("a group needs at least one task result")
    n = np.array([p.n for p in parts], dtype=float)
    values = np.array([p.value for p in parts], dtype=float)
    se = np.array([p.stderr if p.stderr is not None else np.nan for p in parts], dtype=float)
    weights = n / n.sum() if weight_by_size else np.full(len(parts), 1.0 / len(parts))
    value = float(np.sum(weights * values))
    stderr = float(math.sqrt(np.sum((weights * se) ** 2)))
    return MetricValue(
        value, _clean(stderr), _clean(value - Z95 * stderr), _clean(value + Z95 * stderr), int(n.sum()), parts[0].higher_is_better
    )
