"""Scores of graded answers (MT-Bench's 1-10 single-answer grades) with intervals.

::

    grade_summary({"model-a": {"q81/t1": 8.0, "q81/t2": 6.0, "q82/t1": None}, "model-b": {...}},
                  categories={"q81": "writing", "q82": "math"}, rounds=1000, seed=0)

Rules, all stated in ``docs/judging.md`` ("Scores of graded answers"):

- a score of None is a failed grade: left out of every mean and counted in ``failed``; NaN, an
  infinity, a bool or a non-number is refused with a ValueError naming the model and item;
- the interval is Student's t over the graded items with *questions* as clusters (cluster-robust
  CR1 standard error, questions - 1 degrees of freedom: :func:`evalcore.stats.estimates.t_mean`),
  clipped to the grading scale when the caller gives it (``bounds``); an item id ``"q81/t1"`` or
  ``"q81/t2"`` (one turn of a two-turn question) belongs to the question ``"q81"``, and a question's
  turns are one cluster; any other id is its own question. It replaced a percentile bootstrap over
  questions, which covered 0.46-0.78 at 2-4 questions and 0.88-0.90 at 8 (the bundled sample set's
  size); this interval covers 0.97-1.00 there and 0.94-0.97 from 8 (``bench/grade_intervals.py``,
  docs/judging.md "Scores of graded answers"). When every grade is equal and the scale is known, the
  bounded mean's interval (``mid-p-effective``, questions as clusters) is used instead, which does not
  collapse to a point. Each figure names its method in ``interval``;
- a category is looked up by the item id first, then (for an id ``"<q>/t<N>"``) by its question part
  ``"<q>"``; an item without a category is left out of ``by_category`` and counted in a note;
- ``by_turn`` (keys ``"t1"``, ``"t2"``, ...) appears when any item id carries a turn;
- degenerate inputs (no successful grade, one question, resamples without a graded item) give None
  intervals and a note, never NaN or an exception.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping

import numpy as np

from evalcore.boundary.validation import check_integer, check_level
from evalcore.stats.estimates import bounded_mean, t_mean

TURN_ID = re.compile(r"^(?P<question>.+)/t(?P<turn>[1-9][0-9]*)$")
LEVEL = 0.95
_CHUNK_CELLS = 4_000_000  # rounds x questions per chunk of resampling weights


def split_turn(item_id: str) -> tuple[str, str | None]:
    """``("q81", "t2")`` for ``"q81/t2"``; ``(item_id, None)`` for an id without a turn."""
    match = TURN_ID.match(item_id)
    return (match["question"], f"t{match['turn']}") if match else (item_id, None)


def finite_score(value, where: str) -> float | None:
    """``value`` as a float (None stays None: a failed grade); a bool, a non-number, NaN or an infinity
    raises ValueError naming ``where``."""
    if value is None:
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where}: score {value!r} is not a number (None marks a failed grade)")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{where}: score {value} is not finite (None marks a failed grade)")
    return value


def item_key(item, where: str) -> str:
    """An item id as a string key (ints are accepted, as Grade.item_id may be one)."""
    if isinstance(item, bool) or not isinstance(item, str | int) or (isinstance(item, str) and not item):
        raise ValueError(f"{where}: item id {item!r} must be a non-empty string or an integer")
    return str(item)


def checked_scores(scores, what: str = "scores") -> dict[str, dict[str, float | None]]:
    """``scores`` (model -> item -> score) validated, with string keys and float-or-None values."""
    if not isinstance(scores, Mapping):
        raise ValueError(f"{what} must be a dict model -> item id -> score, got {type(scores).__name__}")
    out = {}
    for model, items in scores.items():
        if not isinstance(model, str) or not model:
            raise ValueError(f"{what}: model name {model!r} must be a non-empty string")
        if not isinstance(items, Mapping):
            raise ValueError(f"{what}: model {model!r} must map item ids to scores, got {type(items).__name__}")
        row = {}
        for item, value in items.items():
            key = item_key(item, f"{what}: model {model!r}")
            if key in row:
                raise ValueError(f"{what}: model {model!r} has item {key!r} twice")
            row[key] = finite_score(value, f"{what}: model {model!r}, item {key!r}")
        out[model] = row
    return out


def json_safe(value):
    """``value`` with every non-finite float (numpy's too) replaced by None and numpy scalars made plain:
    what a JSONField stores (a last guard; the figures are built finite or None)."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    return value


def resampling_weights(units: int, *, rounds: int, seed: int) -> np.ndarray:
    """Multinomial bootstrap counts, shape (rounds, units): how often each unit is drawn per round."""
    rng = np.random.default_rng(seed)
    if units == 0:
        return np.zeros((rounds, 0))
    step = max(1, _CHUNK_CELLS // units)
    uniform = np.full(units, 1.0 / units)
    return np.concatenate([rng.multinomial(units, uniform, size=min(step, rounds - start))
                           for start in range(0, rounds, step)]).astype(np.float64)  # fmt: skip


def clustered_mean(values, clusters, *, bounds: tuple[float, float] | None = None, level: float = LEVEL,
                   notes: list[str] | None = None, what: str = "") -> dict:  # fmt: skip
    """``{mean, ci_low, ci_high, n, interval}`` of graded items (``values``, one cluster label each: the
    question): Student's t with the questions as clusters, clipped to ``bounds`` when every value lies
    in them. No grade, or grades from one question only: no interval, and a note says why."""
    n = len(values)
    if n == 0:
        if notes is not None:
            notes.append(f"{what}: no successful grade, no mean")
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0, "interval": None}
    x = np.asarray(values, dtype=float)
    if len(set(clusters)) < 2:
        if notes is not None:
            notes.append(f"{what}: grades from one question only, no interval")
        return {"mean": float(x.mean()), "ci_low": None, "ci_high": None, "n": n, "interval": None}
    inside = bounds is not None and bool(np.all((x >= bounds[0]) & (x <= bounds[1])))
    if np.all(x == x[0]):
        # Every grade equal: Student's t has no spread to measure and would claim certainty from a few
        # questions. On a known scale the bounded mean's interval at the clusters' effective size does not
        # collapse (4 questions all graded 9 on 1-10: 4.2-10); without a scale, say it has no width.
        if inside:
            estimate = bounded_mean(x, low=bounds[0], high=bounds[1], clusters=list(clusters), level=level)
            return {"mean": estimate.value, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high, "n": n,
                    "interval": estimate.method}  # fmt: skip
        if notes is not None:
            notes.append(f"{what}: every grade is {x[0]:g}, so the interval has no width (no spread to measure)")
    estimate = t_mean(x, clusters=list(clusters), bounds=bounds if inside else None, level=level)
    return {"mean": estimate.value, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high, "n": n,
            "interval": estimate.method}  # fmt: skip


def grade_summary(scores: dict[str, dict[str, float | None]], *, categories: dict[str, str] | None = None,
                  rounds: int = 1000, seed: int = 0, level: float = LEVEL,
                  bounds: tuple[float, float] | None = None) -> dict[str, dict]:  # fmt: skip
    """Mean grade per model with a cluster-robust t interval over questions, per category and per turn.

    Parameters
    ----------
    scores : dict model -> dict item id -> float or None
        None is a failed grade (left out, counted in ``failed``).
    categories : dict item id (or question id) -> category, optional
        Looked up by the item id, then by its question part (``"q81"`` for ``"q81/t2"``).
    rounds, seed : int
        Checked, and not used by these intervals (they are analytic); kept for the callers that pass
        them on to panels' bootstraps.
    level : float
        Interval coverage (default 0.95).
    bounds : (low, high), optional
        The grading scale (1-10 for MT-Bench's protocols): intervals are clipped to it. A protocol that
        keeps any number (FastChat's rule) gives none.

    Returns
    -------
    dict model -> dict
        ``{mean, ci_low, ci_high, n, interval, failed, by_category: {category: {mean, ci_low, ci_high,
        n, interval}}, by_turn: {"t1": {...}, "t2": {...}} (only when item ids carry turns), notes:
        [str], level}``; ``interval`` is ``t-clustered`` (two-turn questions), ``t`` (one item a
        question) or None (no interval). Floats are finite or None.
    """
    scores = checked_scores(scores)
    check_integer(rounds, "rounds", minimum=1)
    check_integer(seed, "seed", minimum=0)
    level = check_level(level)
    if bounds is not None:
        low, high = (float(b) for b in bounds)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"bounds must be finite with low < high, got {bounds!r}")
        bounds = (low, high)
    if categories is not None:
        if not isinstance(categories, Mapping):
            raise ValueError(f"categories must be a dict item id -> category, got {type(categories).__name__}")
        categories = {str(k): v for k, v in categories.items()}
        bad = next((k for k, v in categories.items() if not isinstance(v, str) or not v), None)
        if bad is not None:
            raise ValueError(f"categories: item {bad!r} has category {categories[bad]!r}, not a non-empty string")
    all_items = sorted({item for row in scores.values() for item in row})
    turns = sorted({t for t in (split_turn(i)[1] for i in all_items) if t}, key=lambda t: int(t[1:]))

    def category_of(item: str) -> str | None:
        if categories is None:
            return None
        if item in categories:
            return categories[item]
        return categories.get(split_turn(item)[0])

    out = {}
    for model, row in scores.items():
        notes: list[str] = []
        ok = {item: v for item, v in row.items() if v is not None}

        def summary(keep, what: str, ok=ok, notes=notes) -> dict:
            chosen = sorted(item for item in ok if keep(item))
            return clustered_mean([ok[i] for i in chosen], [split_turn(i)[0] for i in chosen], bounds=bounds,
                                  level=level, notes=notes, what=what)  # fmt: skip

        entry = {**summary(lambda item: True, f"model {model!r}"), "failed": len(row) - len(ok)}
        if categories is not None:
            names = sorted({c for c in map(category_of, row) if c is not None})
            entry["by_category"] = {
                c: summary(lambda item, c=c: category_of(item) == c, f"model {model!r}, category {c!r}")
                for c in names
            }  # fmt: skip
            missing = sum(1 for item in row if category_of(item) is None)
            if missing:
                notes.append(f"model {model!r}: {missing} item(s) have no category and are left out of by_category")
        else:
            entry["by_category"] = {}
        if turns:
            entry["by_turn"] = {
                t: summary(lambda item, t=t: split_turn(item)[1] == t, f"model {model!r}, turn {t}") for t in turns
            }  # fmt: skip
        entry.update(notes=notes, level=level)
        out[model] = entry
    return json_safe(out)
