"""Audit a judge before trusting it: agreement with labels, position bias, verbosity and self-preference.

Every figure is computed from the judgments alone (plus the labels), so a report can be recomputed
from ``judgments.jsonl``. Pairs with a failed judgment in either order are left out of every figure
and counted in ``failed_pairs``; a failure is never a tie.

Conventions: a tie (swap average exactly 0.5, both-must-agree disagreeing, a generated ``tie``) is
never correct; the first-position rate counts judgments (two per pair) whose first-shown answer
scored above 0.5; Cohen's kappa compares the swap-average winner (1, 2 or tie) with the label (1 or 2).
Rates carry mid-p 95% intervals (:func:`evalcore.stats.estimates.proportion`; the first-position rate's
two judgments of a pair count as one cluster), mean probabilities a mid-p interval at their effective size
(:func:`~evalcore.stats.estimates.bounded_mean`), kappa a percentile bootstrap over pairs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from evalcore.judging.records import Judgment, PairItem, PairOutcome, pair_outcomes
from evalcore.stats.estimates import Estimate, bounded_mean, proportion

LEVEL = 0.95
POLITE_OPENING = (
    "Thank you so much for this wonderful question! I am truly delighted to help you with it, and I will "
    "do my very best to explain everything clearly, carefully and thoroughly, step by step."
)
POLITE_CLOSING = (
    "I sincerely hope this explanation is helpful and clear. Please do not hesitate to ask if anything is "
    "unclear or if you would like me to go over any step again. It was a genuine pleasure to help you!"
)


def figure(estimate: Estimate) -> dict:
    """A reported figure: ``{value, stderr, ci_low, ci_high, n, interval}`` (``stderr`` is the interval's,
    None where the interval is lopsided)."""
    d = estimate.as_dict()
    return {k: d[k] for k in ("value", "stderr", "ci_low", "ci_high", "n", "interval")}


def rate(values: Sequence[float], *, clusters: Sequence | None = None) -> dict:
    """A proportion (values 0/1) with its mid-p 95% interval (all None, n 0, for no value).

    ``clusters``: one label per value where values come in groups (the two judgments of a pair); the
    interval is then taken at the effective size ``n / design effect`` (``mid-p-effective``) when the
    groups' values are alike, and stays exact (``mid-p``) when they are not.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {"value": None, "stderr": None, "ci_low": None, "ci_high": None, "n": 0, "interval": "mid-p"}
    if not np.all((values == 0.0) | (values == 1.0)):
        raise ValueError("a rate needs values that are 0 or 1")
    if clusters is None or values.size == 1:
        return figure(proportion(int(values.sum()), int(values.size), level=LEVEL))
    return figure(bounded_mean(values, clusters=list(clusters), level=LEVEL))


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa between two label arrays of shape (n,); 0.0 when chance agreement is 1."""
    a, b = np.asarray(a), np.asarray(b)
    categories = np.union1d(a, b)
    observed = float(np.mean(a == b))
    expected = float(sum(np.mean(a == c) * np.mean(b == c) for c in categories))
    return 0.0 if expected >= 1.0 else (observed - expected) / (1.0 - expected)


def kappa_interval(pred: np.ndarray, labels: np.ndarray, *, rounds: int, seed: int) -> dict:
    """Kappa with a percentile bootstrap interval over pairs (``rounds`` resamples, ``seed``)."""
    n = pred.size
    if n == 0:
        return {"value": None, "ci_low": None, "ci_high": None, "n": 0, "interval": "bootstrap"}
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(rounds, n))
    samples = np.array([cohen_kappa(pred[d], labels[d]) for d in draws])
    alpha = (1 - LEVEL) / 2
    low, high = np.quantile(samples, [alpha, 1 - alpha])
    return {"value": cohen_kappa(pred, labels), "ci_low": float(low), "ci_high": float(high), "n": int(n),
            "interval": "bootstrap", "rounds": rounds, "seed": seed}


def audit_report(judgments: Sequence[Judgment], labels: Mapping, *, rounds: int = 1000, seed: int = 0) -> dict:
    """Agreement and position-bias figures of a judge against labels.

    Parameters
    ----------
    judgments : sequence of Judgment
        Both orders of every pair.
    labels : mapping pair_id -> 1 or 2
    rounds, seed : int
        Bootstrap rounds and seed for kappa's interval.

    Returns
    -------
    dict
        ``accuracy_ab``, ``accuracy_ba``, ``accuracy_swap_average``, ``accuracy_both_agree``,
        ``consistency``, ``first_position_rate``, ``kappa`` (each ``{value, ci_low, ci_high, n, interval}``),
        plus ``pairs``, ``judgments``, ``failed_pairs``, ``failed_judgments``, ``ties_swap_average``.
    """
    outcomes, failed = pair_outcomes(list(judgments))
    missing = [o.pair_id for o in outcomes if o.pair_id not in labels]
    if missing:
        raise ValueError(f"pair {missing[0]} has no label")
    y = np.array([labels[o.pair_id] for o in outcomes], dtype=np.int64)

    def correct(attr: str) -> np.ndarray:
        return np.array([getattr(o, attr) for o in outcomes], dtype=np.int64) == y

    swap = np.array([o.winner_swap for o in outcomes], dtype=np.int64)
    first = [float(o.first_ab) for o in outcomes] + [float(o.first_ba) for o in outcomes]
    return {
        "pairs": len(outcomes) + len(failed),
        "judgments": len(judgments),
        "failed_pairs": [str(p) for p in failed],
        "failed_judgments": sum(1 for j in judgments if not j.ok),
        "accuracy_ab": rate(correct("winner_ab")),
        "accuracy_ba": rate(correct("winner_ba")),
        "accuracy_swap_average": rate(correct("winner_swap")),
        "accuracy_both_agree": rate(correct("winner_agree")),
        "consistency": rate([float(o.consistent) for o in outcomes]),
        "first_position_rate": rate(first, clusters=[str(o.pair_id) for o in outcomes] * 2),
        "ties_swap_average": int((swap == 0).sum()),
        "kappa": kappa_interval(swap, y, rounds=rounds, seed=seed),
    }


def preference_report(outcomes: Sequence[PairOutcome], *, side: int) -> dict:
    """How often the swap average prefers answer ``side`` (1 or 2): a mid-p rate over pairs (ties count
    as not preferring), and the mean swap-average probability (in [0, 1]) with a mid-p interval at its
    effective size (None below two pairs)."""
    wins = [float(o.winner_swap == side) for o in outcomes]
    probs = np.array([o.swap_average if side == 1 else 1.0 - o.swap_average for o in outcomes])
    mean = figure(bounded_mean(probs, level=LEVEL)) if probs.size > 1 else None
    return {"share": rate(wins), "mean_probability": mean,
            "ties": sum(1 for o in outcomes if o.winner_swap == 0)}


def gsm8k_solution_text(answer: str) -> str:
    """A GSM8K reference solution as prose: calculator annotations removed, ``#### N`` as a sentence."""
    body, _, final = answer.partition("####")
    body = re.sub(r"<<[^>]*>>", "", body).strip()
    return f"{body}\nThe answer is {final.strip()}." if final.strip() else body


def verbosity_pairs(path: str | Path, *, n: int, seed: int) -> list[PairItem]:
    """``n`` GSM8K questions (drawn with ``seed``) whose answers are the reference solution
    (``answer_1``) and the same solution wrapped in polite filler (``answer_2``): identical content.

    ``path`` is GSM8K's ``test.jsonl`` (``question``, ``answer``).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"GSM8K file {str(path)!r} does not exist")
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                record = json.loads(line)
                rows.append((str(record["question"]), str(record["answer"])))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{path}: line {lineno} is not a GSM8K record with question and answer") from None
    if not 0 < n <= len(rows):
        raise ValueError(f"verbosity pairs: n must be between 1 and {len(rows)}")
    chosen = np.sort(np.random.default_rng(seed).choice(len(rows), size=n, replace=False))
    pairs = []
    for i, row in enumerate(chosen):
        question, answer = rows[int(row)]
        plain = gsm8k_solution_text(answer)
        padded = f"{POLITE_OPENING}\n\n{plain}\n\n{POLITE_CLOSING}"
        pairs.append(PairItem(pair_id=f"verbosity-{i}", question=question, answer_1=plain, answer_2=padded))
    return pairs


def verbosity_report(judgments: Sequence[Judgment]) -> dict:
    """Share of verbosity pairs where the judge prefers the padded copy (answer_2)."""
    outcomes, failed = pair_outcomes(list(judgments))
    return {"pairs": len(outcomes) + len(failed), "failed_pairs": [str(p) for p in failed],
            "prefers_padded": preference_report(outcomes, side=2)}


def self_preference_report(judgments: Sequence[Judgment], own_side: Mapping) -> dict:
    """Share of pairs where the judge prefers the answer it wrote itself.

    ``own_side`` maps pair_id -> 1 or 2 (the side holding the judge's own answer).
    """
    outcomes, failed = pair_outcomes(list(judgments))
    flipped = []
    for o in outcomes:
        if own_side[o.pair_id] == 1:
            flipped.append(o)
        else:  # make side 1 the judge's own answer
            flipped.append(PairOutcome(o.pair_id, 1 - o.score_ab, 1 - o.score_ba, 1 - o.swap_average,
                                       _flip(o.winner_ab), _flip(o.winner_ba), _flip(o.winner_swap),
                                       _flip(o.winner_agree), o.first_ab, o.first_ba))
    return {"pairs": len(outcomes) + len(failed), "failed_pairs": [str(p) for p in failed],
            "prefers_own": preference_report(flipped, side=1)}


def _flip(winner: int) -> int:
    return {0: 0, 1: 2, 2: 1}[winner]
