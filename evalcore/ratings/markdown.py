"""Style counts of one answer: tokens, markdown headers, list items and bold spans.

Our own small counter (no markdown library): fenced code blocks (``` or ~~~) and inline code spans are
removed before counting markup, so a ``# comment`` in a code block is not a header. Tokens are counted on
the whole text with a simple word/punctuation regex (a stand-in for a model tokenizer; callers with a real
tokenizer can pass their own count).
"""

from __future__ import annotations

import re

import numpy as np

from evalcore.ratings.battles import STYLE_FEATURES

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)")
_HEADER = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+\S|$)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def count_tokens(text: str) -> int:
    """Words and punctuation marks: ``len(re.findall(r"\\w+|[^\\w\\s]", text))``."""
    return sum(1 for _ in _TOKEN.finditer(text))


def _prose_lines(text: str) -> list[str]:
    """Lines outside fenced code blocks, with inline code spans blanked."""
    lines = []
    fence: str | None = None
    for line in text.splitlines():
        opener = _FENCE.match(line)
        if fence is None:
            if opener:
                fence = opener.group(1)[0] * len(opener.group(1))
                continue
            lines.append(_INLINE_CODE.sub(" ", line))
        elif opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
            fence = None
    return lines


def markdown_style_counts(text: str, *, tokens: int | None = None) -> dict[str, int]:
    """Count style elements of one answer.

    Parameters
    ----------
    text : str
    tokens : int, optional
        Token count from the caller's tokenizer; default :func:`count_tokens`.

    Returns
    -------
    dict
        ``{"tokens", "headers", "list_items", "bold"}`` (the :data:`STYLE_FEATURES` names).
    """
    lines = _prose_lines(text)
    headers = sum(1 for line in lines if _HEADER.match(line))
    list_items = sum(1 for line in lines if _LIST_ITEM.match(line) and not _is_rule(line))
    bold = sum(len(_BOLD.findall(line)) for line in lines)
    return {
        "tokens": count_tokens(text) if tokens is None else int(tokens),
        "headers": headers,
        "list_items": list_items,
        "bold": bold,
    }


def _is_rule(line: str) -> bool:
    """A thematic break like ``* * *`` or ``- - -`` is not a list item."""
    stripped = line.replace(" ", "").replace("\t", "")
    return len(stripped) >= 3 and len(set(stripped)) == 1 and stripped[0] in "-*_"


def style_vector(text: str, *, tokens: int | None = None) -> np.ndarray:
    """:func:`markdown_style_counts` as an array, shape (4,), in :data:`STYLE_FEATURES` order."""
    counts = markdown_style_counts(text, tokens=tokens)
    return np.array([counts[name] for name in STYLE_FEATURES], dtype=np.float64)
