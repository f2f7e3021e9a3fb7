"""Scores of graded answers (MT-Bench's 1-10 single-answer grades) with intervals.

::

    grade_summary({"model-a": {"q81/t1": 8.0, "q81/t2": 6.0, "q82/t1": None}, "model-b": {...}},
                  categories={"q81": "writing", "q82": "math"}, rounds=1000, seed=0)

Rules, all stated in ``docs/judging.md`` ("Scores of graded answers"):

- a score of None is a failed grade: left out of every mean and counted in ``failed``; NaN, an
  infinity, a bool or a non-number is refused with a ValueError naming the model and item;
- the interval is a 95% percentile bootstrap over *questions*, with the same resampled questions
  for every model (so the difference between two models' intervals is paired, not independent); an
  item id ``"q81/t1"`` or ``"q81/t2"`` (one turn of a two-turn question) belongs to the question
  ``"q81"``, and a question's turns are resampled together; any other id is its own question;
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


def bootstrap_mean(sums: np.ndarray, counts: np.ndarray, weights: np.ndarray, *, level: float = LEVEL,
                   notes: list[str] | None = None, what: str = "") -> dict:  # fmt: skip
    """Mean with a percentile interval from per-unit sums and counts (shape (units,)) and resampling
    ``weights`` (shape (rounds, units)): ``{mean, ci_low, ci_high, n}``.

    A round that draws no graded item has no mean and is skipped; with more than half skipped, or
    fewer than two units holding a grade, the interval is None and a note says why.
    """
    n = int(counts.sum())
    if n == 0:
        if notes is not None:
            notes.append(f"{what}: no successful grade, no mean")
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    mean = float(sums.sum() / n)
    graded_units = int((counts > 0).sum())
    if graded_units < 2:
        if notes is not None:
            notes.append(f"{what}: grades from one question only, no interval")
        return {"mean": mean, "ci_low": None, "ci_high": None, "n": n}
    drawn = weights @ counts
    keep = drawn > 0
    if keep.sum() < max(1, weights.shape[0] / 2):
        if notes is not None:
            notes.append(f"{what}: most resamples draw no graded item, no interval")
        return {"mean": mean, "ci_low": None, "ci_high": None, "n": n}
    means = (weights[keep] @ sums) / drawn[keep]
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    # The percentile bounds of a mean of bounded scores are bounded; clip float noise around the mean.
    return {"mean": mean, "ci_low": float(min(low, mean)), "ci_high": float(max(high, mean)), "n": n}


def grade_summary(scores: dict[str, dict[str, float | None]], *, categories: dict[str, str] | None = None,
                  rounds: int = 1000, seed: int = 0, level: float = LEVEL) -> dict[str, dict]:  # fmt: skip
    """Mean grade per model with a paired bootstrap interval, per category and per turn.

    Parameters
    ----------
    scores : dict model -> dict item id -> float or None
        None is a failed grade (left out, counted in ``failed``).
    categories : dict item id (or question id) -> category, optional
        Looked up by the item id, then by its question part (``"q81"`` for ``"q81/t2"``).
    rounds, seed : int
        Bootstrap rounds and seed; one set of resampled questions serves every model.
    level : float
        Interval coverage (default 0.95).

    Returns
    -------
    dict model -> dict
        ``{mean, ci_low, ci_high, n, failed, by_category: {category: {mean, ci_low, ci_high, n}},
        by_turn: {"t1": {...}, "t2": {...}} (only when item ids carry turns), notes: [str],
        rounds, seed, level}``. Floats are finite or None.
    """
    scores = checked_scores(scores)
    rounds = check_integer(rounds, "rounds", minimum=1)
    seed = check_integer(seed, "seed", minimum=0)
    level = check_level(level)
    if categories is not None:
        if not isinstance(categories, Mapping):
            raise ValueError(f"categories must be a dict item id -> category, got {type(categories).__name__}")
        categories = {str(k): v for k, v in categories.items()}
        bad = next((k for k, v in categories.items() if not isinstance(v, str) or not v), None)
        if bad is not None:
            raise ValueError(f"categories: item {bad!r} has category {categories[bad]!r}, not a non-empty string")
    all_items = sorted({item for row in scores.values() for item in row})
    questions = sorted({split_turn(item)[0] for item in all_items})
    unit = {q: u for u, q in enumerate(questions)}
    weights = resampling_weights(len(questions), rounds=rounds, seed=seed)
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
            sums, counts = np.zeros(len(questions)), np.zeros(len(questions))
            for item, value in ok.items():
                if keep(item):
                    u = unit[split_turn(item)[0]]
                    sums[u] += value
                    counts[u] += 1
            return bootstrap_mean(sums, counts, weights, level=level, notes=notes, what=what)

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
        entry.update(notes=notes, rounds=rounds, seed=seed, level=level)
        out[model] = entry
    return json_safe(out)
