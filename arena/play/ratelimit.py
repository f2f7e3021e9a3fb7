"""Fixed-window rate limits on the cache: per voter session and per hashed IP address.

On Redis both counters move in one pipelined round trip (INCR and EXPIRE per key); on any other
cache backend the portable ``add`` + ``incr`` path counts the same way. When the cache is down (Redis
restarting), the limits are counted from the database instead: the battles, turns and votes the
voter's session and address already made in the window. Slower, but a voter never gets a 500.
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache, caches
from django.core.cache.backends.redis import RedisCache

from arena.models import Battle, Turn

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RateLimited(Exception):
    """Too many requests: retry after ``retry_after`` seconds."""

    what: str
    retry_after: int

    def __str__(self) -> str:
        return f"Too many {self.what}: try again in {self.retry_after} s."


_CLIENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _redis_client(backend):
    """The redis-py client behind Django's RedisCache, or None for another backend.

    Django builds a new client object (about 170 response callbacks) for every cache call; one per
    backend and process is enough, since the connection pool underneath is shared anyway.
    """
    if not isinstance(backend, RedisCache):
        return None
    client = _CLIENTS.get(backend)
    if client is None:
        client = _CLIENTS[backend] = backend._cache.get_client(write=True)
    return client


def _counts_redis(client, keys: list[str], timeout: int) -> list[int]:
    pipeline = client.pipeline(transaction=False)
    for key in keys:
        pipeline.incr(key)
        pipeline.expire(key, timeout)
    replies = pipeline.execute()
    return [int(replies[2 * i]) for i in range(len(keys))]


def _counts_portable(keys: list[str], timeout: int) -> list[int]:
    counts = []
    for key in keys:
        cache.add(key, 0, timeout=timeout)
        try:
            counts.append(cache.incr(key))
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=timeout)
            counts.append(1)
    return counts


def hit(action: str, *, session_hash: str, ip_hash: str, per_window: int) -> None:
    """Count one ``action``; raise :class:`RateLimited` when either key is over its limit."""
    _count(
        action,
        ((f"session:{session_hash}", per_window), (f"ip:{ip_hash}", per_window * settings.ARENA_IP_MULTIPLIER)),
        fallback=lambda since: _counts_database(action, session_hash, ip_hash, since=since),
    )


def hit_address(action: str, *, ip_hash: str, limit: int) -> None:
    """Count one ``action`` for an address alone (e.g. new sessions); raise :class:`RateLimited` past ``limit``."""
    # With the cache down there is no record of new sessions to count: they are let through (logged).
    _count(action, ((f"ip:{ip_hash}", limit),), fallback=lambda since: [0])


def _count(action: str, limits: tuple[tuple[str, int], ...], *, fallback) -> None:
    """Count one ``action`` under each ``(key, limit)``; ``fallback(since)`` gives the counts from the
    database while the cache is down."""
    window = settings.ARENA_RATE_WINDOW_S
    now = int(time.time())
    window_start = now - now % window
    retry_after = max(1, window_start + window - now)
    keys = [f"rate:{action}:{who}:{window_start}" for who, _ in limits]
    backend = caches["default"]
    try:
        client = _redis_client(backend)
        if client is not None:
            counts = _counts_redis(client, [backend.make_and_validate_key(k) for k in keys], window + 5)
        else:
            counts = _counts_portable(keys, window + 5)
    except Exception as exc:  # noqa: BLE001 - the cache is down (redis-py raises its own ConnectionError)
        log.warning("rate limit cache unavailable (%r): counting %s from the database", exc, action)
        counts = fallback(datetime.fromtimestamp(window_start, UTC))
    for count, (_, limit) in zip(counts, limits):
        if count > limit:
            raise RateLimited(action, retry_after)


def _counts_database(action: str, session_hash: str, ip_hash: str, *, since: datetime) -> list[int]:
    """The counts the cache would hold, from rows: turns started (``battles``, a new battle's first turn
    included) or battles voted (``votes``) since ``since``, by session and by address, plus this one."""
    if action == "votes":
        voted = Battle.objects.filter(status=Battle.Status.VOTED, updated_at__gte=since)
        by_session, by_ip = voted.filter(session_hash=session_hash), voted.filter(ip_hash=ip_hash)
    else:
        turns = Turn.objects.filter(created_at__gte=since)
        by_session, by_ip = turns.filter(battle__session_hash=session_hash), turns.filter(battle__ip_hash=ip_hash)
    return [by_session.count() + 1, by_ip.count() + 1]
