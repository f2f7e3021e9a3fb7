"""Argument checks at evalcore's public boundary: one rule per kind of argument, one message everywhere.

Every public function that takes a coverage ``level`` (or a test's ``alpha`` or ``power``) calls
:func:`check_probability`; every count (``n``, ``c``, ``k`` of pass@k, sample sizes) goes through
:func:`check_integer` or :func:`integer_array`. Each raises ``ValueError`` naming the argument and the
value it got, e.g. ``level must be between 0 and 1 (exclusive), got 95``: a ``level`` of 95 (a percent
where a fraction belongs) would otherwise give NaN intervals without a word.
"""

from __future__ import annotations

import numbers

import numpy as np


def _shown(value) -> str:
    """``value`` as a message shows it: numbers plainly (95, 0.5, True), anything else by repr ('95')."""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, numbers.Number):
        return str(value)
    return repr(value)


def check_probability(value, name: str = "level") -> float:
    """``value`` as a float after checking it is a real number strictly between 0 and 1.

    Used for interval coverage (``level``), a test's size (``alpha``) and its ``power``.
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real) or not 0 < value < 1:
        raise ValueError(f"{name} must be between 0 and 1 (exclusive), got {_shown(value)}")
    return float(value)


def check_level(level) -> float:
    """``level`` (an interval's coverage, e.g. 0.95) after checking it is strictly between 0 and 1."""
    return check_probability(level, "level")


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def check_integer(value, name: str, *, minimum: int | None = None) -> int:
    """``value`` as an int after checking it is an integer (Python or numpy; not a bool, not 10.0).

    With ``minimum``, also checks ``value >= minimum``.
    """
    if not _is_integer(value):
        raise ValueError(f"{name} must be an integer, got {_shown(value)}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def integer_array(value, name: str) -> np.ndarray:
    """``value`` (an integer or array_like of integers, any shape) as an int64 array.

    Floats (even 10.0), bools and anything else are refused with a ``ValueError`` naming ``name`` and
    the first offending element.
    """
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "iu":
            return value.astype(np.int64, copy=False)
        items = value.ravel()
    elif np.ndim(value) == 0:
        return np.asarray(check_integer(value, name), dtype=np.int64)
    else:
        items = np.asarray(value, dtype=object).ravel()
    for item in items:
        if not _is_integer(item):
            raise ValueError(f"{name} must be integers, got {_shown(item)}")
    return np.asarray(value, dtype=np.int64)


def check_prior(value) -> float:
    """An L2 ``prior`` (Bradley-Terry and style fits) as a float: None means 0; it must be finite and >= 0.

    A negative prior rewards large ratings and a NaN one poisons every Newton step: both are refused.
    """
    if value is None:
        return 0.0
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real) or not (np.isfinite(value) and value >= 0):
        raise ValueError(f"prior must be a non-negative finite number, got {_shown(value)}")
    return float(value)


def yaml_problem(exc: Exception) -> str:
    """A YAML parser error as one line: what is wrong and where (``line 3, column 14``).

    PyYAML's own text spans four or five lines (context, a copy of the line, a caret); a CLI error
    or a skipped-file warning must stay on one line.
    """
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if problem is None:
        return " ".join(str(exc).split())
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{where}"


__all__ = ["check_integer", "check_level", "check_prior", "check_probability", "integer_array", "yaml_problem"]
