"""Shared hypothesis strategies and the one rule every parser fuzz test checks.

The rule (issue 12): a parser given anything either returns or raises its documented error, a
ValueError with a message that says what is wrong. A bare codec or JSON error (``UnicodeDecodeError``,
``json.JSONDecodeError``: ValueError subclasses, but their messages name neither the file nor the
field), and anything else (TypeError, KeyError, AttributeError, IndexError, RecursionError, ...), is a
bug in the parser.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import strategies as st

UNHELPFUL = (UnicodeError, json.JSONDecodeError)


def documented(call: Callable[[], object], *, errors: tuple[type[Exception], ...] = (ValueError,)) -> object:
    """``call()``'s result, or the documented error it raised; any other exception propagates."""
    try:
        return call()
    except errors as exc:
        assert not isinstance(exc, UNHELPFUL), f"undocumented {type(exc).__name__}: {exc}"
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        return exc


# Scalars as YAML or JSON would produce them, including the awkward ones.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", " ", "model_a", "model_b", "tie", "tie (bothbad)", "left", "right", "A", "B", "1", "2"]),
)


def json_values(keys: st.SearchStrategy[str] | None = None, max_leaves: int = 12) -> st.SearchStrategy:
    """JSON-like values; dict keys from ``keys`` (default: short text)."""
    keys = keys if keys is not None else st.text(max_size=8)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
        max_leaves=max_leaves,
    )


def mappings(keys: list[str], *, extra: st.SearchStrategy | None = None) -> st.SearchStrategy[dict]:
    """Dicts whose keys mostly come from ``keys`` (the parser's own) and whose values are anything."""
    key = st.sampled_from(keys) | st.text(max_size=8) if extra is None else st.sampled_from(keys) | extra
    return st.dictionaries(key, json_values(st.sampled_from(keys) | st.text(max_size=6)), max_size=len(keys) + 2)
