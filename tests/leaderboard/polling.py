"""Waiting on a worker's only output, the database: poll a row until a condition holds (bounded)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for_row(fetch: Callable[[], object], condition, *, timeout: float, what: str, log=lambda: ""):
    """``fetch()`` until ``condition(row)``; an AssertionError with the row and ``log()`` after ``timeout``.

    Also for anything else that is polled (an HTTP answer, a server's state): ``row`` is what ``fetch``
    returns; a model row is shown by its fields."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = fetch()
        if condition(row):
            return row
        time.sleep(0.1)
    row = fetch()
    raise AssertionError(f"timed out waiting for {what}: {getattr(row, '__dict__', row)!r}\n{log()}")


def wait_until(condition: Callable[[], object], *, timeout: float, what: str, log=lambda: "") -> None:
    """Poll ``condition()`` until it is true; an AssertionError naming ``what`` after ``timeout`` seconds."""
    wait_for_row(condition, bool, timeout=timeout, what=what, log=log)
