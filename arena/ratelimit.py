"""Fixed-window rate limits on the cache: per voter session and per hashed IP address."""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache


@dataclass(frozen=True)
class RateLimited(Exception):
    """Too many requests: retry after ``retry_after`` seconds."""

    what: str
    retry_after: int

    def __str__(self) -> str:
        return f"Too many {self.what}: try again in {self.retry_after} s."


def hit(action: str, *, session_hash: str, ip_hash: str, per_window: int) -> None:
    """Count one ``action``; raise :class:`RateLimited` when either key is over its limit."""
    window = settings.ARENA_RATE_WINDOW_S
    now = int(time.time())
    window_start = now - now % window
    retry_after = max(1, window_start + window - now)
    limits = ((f"session:{session_hash}", per_window), (f"ip:{ip_hash}", per_window * settings.ARENA_IP_MULTIPLIER))
    for who, limit in limits:
        key = f"rate:{action}:{who}:{window_start}"
        cache.add(key, 0, timeout=window + 5)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=window + 5)
            count = 1
        if count > limit:
            raise RateLimited(action, retry_after)
