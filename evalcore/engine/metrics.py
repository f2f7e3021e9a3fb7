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

Every reported number's interval comes from :mod:`evalcore.stats.estimates` (one method per kind,
chosen for its coverage at the sizes the site shows): proportions (every value 0 or 1) the mid-p exact
interval; means of metrics bounded in [0, 1] (F1, pass@k over several samples) the mid-p interval at
their effective size; other means Student's t; ratio metrics (perplexities, bits per byte) a seeded
percentile bootstrap over documents; a group's average the pooled mid-p interval of its parts (or
MOVER where a part is not bounded). ``stderr`` is the interval's own (half its width over 1.96), None
where the interval is lopsided (0 of 4 right) or missing, never a plug-in ``sqrt(p(1-p)/n)`` that is 0
at 0 of n.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass

import numpy as np

from evalcore.boundary.validation import check_integer
from evalcore.stats import estimates, passk

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
# Metrics whose per-document values lie in [0, 1] (their means get the bounded-mean interval).
BOUNDED_METRICS = {"acc", "acc_norm", "acc_bytes", "acc_mutual_info", "exact_match", "f1", "em", "pass@k"}
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
    """A reported number: value, standard error, 95% interval, how many items it covers, and the method.

    ``stderr`` is the interval's (:func:`evalcore.stats.estimates.interval_se`), None where the interval
    is lopsided or missing. ``effective_n`` is the size a mid-p interval was taken at (what a group's
    pooled interval weighs); None for other methods.
    """

    value: float
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    higher_is_better: bool
    interval: str = "t"
    effective_n: float | None = None

    def as_dict(self) -> dict:
        return {
            "value": self.value,
            "stderr": self.stderr,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
            "higher_is_better": self.higher_is_better,
            "interval": self.interval,
            "effective_n": self.effective_n,
        }

    def estimate(self) -> estimates.Estimate:
        return estimates.Estimate(self.value, self.ci_low, self.ci_high, self.n, self.interval,
                                  effective_n=self.effective_n)  # fmt: skip


def clean(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


_clean = clean


def from_estimate(estimate: estimates.Estimate, *, higher_is_better: bool = True) -> MetricValue:
    """The engine's reported number for an :class:`~evalcore.stats.estimates.Estimate`."""
    return MetricValue(
        estimate.value, _clean(estimate.se), _clean(estimate.ci_low), _clean(estimate.ci_high), int(estimate.n),
        higher_is_better, estimate.method, estimate.effective_n,
    )  # fmt: skip


def bootstrap_value(value: float, stats, n: int, *, higher_is_better: bool) -> MetricValue:
    """A value with the percentile-bootstrap interval of ``stats`` (shape (rounds,)); stderr from the interval."""
    stats = np.asarray(stats, dtype=float)
    stats = stats[np.isfinite(stats)]
    if stats.size < 2 or not math.isfinite(value):
        return MetricValue(value, None, None, None, n, higher_is_better, "bootstrap")
    low, high = (float(q) for q in np.percentile(stats, [2.5, 97.5]))
    low, high = min(low, value), max(high, value)
    return from_estimate(estimates.Estimate(value, low, high, n, "bootstrap"), higher_is_better=higher_is_better)


def mean_value(values, *, higher_is_better: bool = True, metric: str = "", clusters=None) -> MetricValue:
    """Mean of per-item values (shape (n,)) with its 95% interval (:mod:`evalcore.stats.estimates`).

    Every value 0 or 1: a proportion, the mid-p exact interval (at 0 of 4: [0, 0.53], not a point).
    ``metric`` one of :data:`BOUNDED_METRICS` (values in [0, 1]): the mid-p interval at the effective
    size. Otherwise Student's t. ``clusters`` (one label per item, from the task's ``cluster_key``):
    documents that share a passage or template count as less than independent ones.
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("cannot aggregate a metric over zero items")
    if values.size == 1:
        return MetricValue(float(values[0]), None, None, None, 1, higher_is_better, "none")
    base = "pass@k" if metric.startswith("pass@") else metric
    in_unit = bool(np.all((values >= 0.0) & (values <= 1.0)))
    binary = bool(np.all((values == 0.0) | (values == 1.0)))
    if binary or (base in BOUNDED_METRICS and in_unit):
        estimate = estimates.bounded_mean(values, clusters=clusters)
    else:
        estimate = estimates.t_mean(values, clusters=clusters)
    return from_estimate(estimate, higher_is_better=higher_is_better)


def ratio_statistic(name: str, numerators: np.ndarray, denominators: np.ndarray) -> float:
    """Perplexity-style metric from summed log-likelihoods (numerators) and unit counts."""
    total_ll, total_units = float(np.sum(numerators)), float(np.sum(denominators))
    if total_units <= 0:
        return float("nan")
    if name == "bits_per_byte":
        return -total_ll / total_units / math.log(2)
    return math.exp(-total_ll / total_units)


def ratio_value(name: str, numerators, denominators, *, seed: int = 0) -> MetricValue:
    """A ratio metric (perplexity, bits per byte) with a 95% interval over documents.

    The mean log-likelihood per unit ``R = sum(ll) / sum(units)`` gets the delta-method t interval
    (:func:`evalcore.stats.estimates.ratio_of_sums`), mapped through the metric (``exp(-R)`` for
    perplexities, ``-R / ln 2`` for bits per byte). Documents with no units (an empty text) leave only the
    seeded percentile bootstrap.
    """
    numerators, denominators = np.asarray(numerators, float), np.asarray(denominators, float)
    n = numerators.size
    if n == 0:
        raise ValueError("cannot aggregate a metric over zero items")
    value = ratio_statistic(name, numerators, denominators)
    if n < 2:
        return MetricValue(value, None, None, None, n, False, "delta-t")
    if np.all(denominators > 0) and np.all(np.isfinite(numerators)) and math.isfinite(value):
        _, low, high = estimates.ratio_of_sums(numerators, denominators)[:3]

        def metric_of(r: float) -> float:
            return -r / math.log(2) if name == "bits_per_byte" else math.exp(min(-r, 700.0))

        bounds = sorted((metric_of(low), metric_of(high)))
        estimate = estimates.Estimate(value, min(bounds[0], value), max(bounds[1], value), n, "delta-t")
        return from_estimate(estimate, higher_is_better=False)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(BOOTSTRAP_ROUNDS, n))
    stats = np.array([ratio_statistic(name, numerators[d], denominators[d]) for d in draws])
    return bootstrap_value(value, stats, n, higher_is_better=False)


def group_value(parts: list[MetricValue], *, weight_by_size: bool) -> MetricValue:
    """A group's average of its tasks' values: micro (weighted by n) or macro (equal weights).

    Parts that are all mid-p numbers (proportions, bounded means) get the pooled mid-p interval at the
    pooled effective size, so a task at 0 of 4 counts as four uncertain documents; otherwise MOVER,
    built from the parts' own intervals (a part without one leaves the group without one).
    """
    if not parts:
        raise ValueError("a group needs at least one task result")
    weights = [p.n for p in parts] if weight_by_size else None
    pieces = [p.estimate() for p in parts]
    if all(p.effective_n and p.interval.startswith(("mid-p", "pooled-mid-p")) for p in parts) and all(
        0.0 <= p.value <= 1.0 for p in parts
    ):
        estimate = estimates.pooled(pieces, weights) if weight_by_size else estimates.macro(pieces)
    else:
        estimate = estimates.mover(pieces, weights)
    return from_estimate(estimate, higher_is_better=parts[0].higher_is_better)
