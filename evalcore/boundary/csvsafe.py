"""CSV cells that a spreadsheet will not run as formulas (OWASP "CSV injection").

Every CSV Podium writes goes through :func:`writer`: a text cell starting with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return gets a leading apostrophe, which spreadsheets show as text; so does one whose
first character after leading white space (spaces, newlines, no-break and byte-order-mark characters,
which some importers trim) is such a trigger or its full-width form (``＝``, ``＋``, ``－``, ``＠``, which
some spreadsheets fold to ASCII). Numbers stay
numbers: ints and floats are never touched, and neither is a text cell that parses as a number
(``-0.25``, ``+3``, ``-inf``), so numeric columns written as strings read back unchanged.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
FULL_WIDTH_TRIGGERS = ("\uff1d", "\uff0b", "\uff0d", "\uff20")  # ＝ ＋ － ＠
_TRIMMED = " \t\r\n\u00a0\u3000\ufeff\u200b"


def _formula_like(text: str) -> bool:
    if text.startswith(FORMULA_TRIGGERS):
        return True
    return text.lstrip(_TRIMMED).startswith(FORMULA_TRIGGERS + FULL_WIDTH_TRIGGERS)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_cell(value: Any) -> Any:
    """``value`` with a leading apostrophe when it is text a spreadsheet would evaluate."""
    if isinstance(value, str) and _formula_like(value) and not _is_number(value):
        return "'" + value
    return value


class SafeWriter:
    """A ``csv.writer`` whose rows pass through :func:`safe_cell`."""

    def __init__(self, fh, **kwargs: Any) -> None:
        self._writer = csv.writer(fh, **kwargs)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([safe_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def writer(fh, **kwargs: Any) -> SafeWriter:
    """Like :func:`csv.writer`, escaping formula-like text cells."""
    return SafeWriter(fh, **kwargs)
