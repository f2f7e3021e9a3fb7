"""Portable SQL for fingerprints: several values as one text, the same on PostgreSQL and SQLite.

PostgreSQL's ``row(...)::text`` does not exist in SQLite (the demo's database), so a fingerprint query
joins ``CAST(value AS TEXT)`` pieces with ``|`` instead (NULL as the empty string).
"""

from __future__ import annotations


def text_of(*expressions: str) -> str:
    """A SQL expression: the ``expressions`` as text, joined by ``|``."""
    if not expressions:
        raise ValueError("text_of needs at least one expression")
    return " || '|' || ".join(f"coalesce(CAST({e} AS TEXT), '')" for e in expressions)
