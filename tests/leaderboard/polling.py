"""Waiting on a worker's only output, the database: poll a row until a condition holds (bounded)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for_row(fetch: Callable[[], object], condition, *, timeout: float, what: str, log):
    """``fetch()`` until ``condition(row)``; an AssertionError with the row and ``log()`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = fetch()
        if condition(row):
            return row
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: {fetch().__dict__}\n{log()}")
