"""Corpus-level metrics: one number from all documents' (gold, prediction) pairs, as the harness.

- ``f1`` (multiple choice): binary F1 of the predicted choice index against the gold index, label
  1 positive (scikit-learn's ``f1_score`` default); ``mcc``: Matthews correlation of the same pairs;
- ``bleu``, ``chrf``, ``ter`` (generation): sacrebleu's ``corpus_bleu`` / ``corpus_chrf`` /
  ``corpus_ter`` with its default settings over the filtered answers; a document's gold may be a
  list of references (then every document needs the same number).

Each per-document value is stored as ``[gold, prediction]``; the standard error is a seeded
bootstrap over documents (the harness bootstraps these too, with an unseeded pool).
"""

from __future__ import annotations

import math

import numpy as np

from evalcore.engine.metrics import MetricValue, bootstrap_value

BOOTSTRAP_ROUNDS = 100  # the harness caps bleu/chrf/ter bootstraps at 100 draws


def _labels(pairs) -> tuple[np.ndarray, np.ndarray]:
    gold = np.array([int(p[0]) for p in pairs])
    pred = np.array([int(p[1]) for p in pairs])
    if not set(np.unique(np.concatenate([gold, pred]))) <= {0, 1}:
        raise ValueError("f1 of multiple-choice answers is binary: gold and predicted indices must be 0 or 1")
    return gold, pred


def binary_f1(pairs) -> float:
    gold, pred = _labels(pairs)
    true_pos = float(np.sum((gold == 1) & (pred == 1)))
    denominator = float(np.sum(gold == 1) + np.sum(pred == 1))
    return 0.0 if denominator == 0 else 2 * true_pos / denominator


def matthews(pairs) -> float:
    gold = np.array([int(p[0]) for p in pairs])
    pred = np.array([int(p[1]) for p in pairs])
    classes = np.unique(np.concatenate([gold, pred]))
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)))
    for g, q in zip(gold, pred):
        confusion[index[g], index[q]] += 1
    total, correct = confusion.sum(), np.trace(confusion)
    true_counts, pred_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    numerator = correct * total - float(true_counts @ pred_counts)
    denominator = math.sqrt((total**2 - float(pred_counts @ pred_counts)) * (total**2 - float(true_counts @ true_counts)))
    return 0.0 if denominator == 0 else numerator / denominator


def _sacrebleu_inputs(pairs) -> tuple[list[str], list[list[str]]]:
    refs = [p[0] if isinstance(p[0], list | tuple) else [p[0]] for p in pairs]
    preds = [p[1][0] if isinstance(p[1], list | tuple) else p[1] for p in pairs]
    widths = {len(r) for r in refs}
    if len(widths) != 1:
        raise ValueError("bleu/chrf/ter need the same number of references for every document")
    return [str(p) for p in preds], [[str(r[i]) for r in refs] for i in range(widths.pop())]


def sacrebleu_score(name: str, pairs) -> float:
    import sacrebleu  # lazily: only tasks that score translations need it

    preds, refs = _sacrebleu_inputs(pairs)
    function = {"bleu": sacrebleu.corpus_bleu, "chrf": sacrebleu.corpus_chrf, "ter": sacrebleu.corpus_ter}[name]
    return float(function(preds, refs).score)


def corpus_statistic(aggregation: str, pairs) -> float:
    if aggregation == "f1":
        return binary_f1(pairs)
    if aggregation == "matthews_corrcoef":
        return matthews(pairs)
    return sacrebleu_score(aggregation, pairs)


def corpus_value(aggregation: str, pairs, *, seed: int = 0, higher_is_better: bool = True):
    """A :class:`~evalcore.engine.metrics.MetricValue` with a seeded bootstrap standard error."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("cannot aggregate a metric over zero items")
    value = corpus_statistic(aggregation, pairs)
    if len(pairs) < 2:
        return MetricValue(value, None, None, None, 1, higher_is_better, "bootstrap")
    rng = np.random.default_rng(seed)
    stats = [corpus_statistic(aggregation, [pairs[i] for i in rng.integers(0, len(pairs), len(pairs))])
             for _ in range(BOOTSTRAP_ROUNDS)]  # fmt: skip
    return bootstrap_value(value, stats, len(pairs), higher_is_better=higher_is_better)
