"""Rate limits count the same on Redis (one pipelined round trip) and on the portable cache path."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import caches

from arena.models import Battle, LanguageModel, Turn
from arena.play.ratelimit import RateLimited, hit
from tests.conftest import free_port


@pytest.fixture(params=["redis", "locmem"])
def limit_cache(request, settings):
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        backend = {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": "t",
        }
    else:
        backend = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": uuid.uuid4().hex}
    settings.CACHES = {"default": backend}
    settings.ARENA_RATE_WINDOW_S = 60
    settings.ARENA_IP_MULTIPLIER = 3
    yield caches["default"]
    caches["default"].clear() if request.param == "locmem" else None


def test_session_limit_then_ip_limit(limit_cache):
    voter, ip = uuid.uuid4().hex, uuid.uuid4().hex
    for _ in range(2):
        hit("votes", session_hash=voter, ip_hash=ip, per_window=2)
    with pytest.raises(RateLimited) as refused:
        hit("votes", session_hash=voter, ip_hash=ip, per_window=2)
    assert refused.value.what == "votes" and 1 <= refused.value.retry_after <= 60
    assert "Too many votes" in str(refused.value)
    # Other sessions behind the same address share its (3x larger) limit: 6 hits in all, 3 so far
    # (a refused hit counts too).
    for _ in range(3):
        hit("votes", session_hash=uuid.uuid4().hex, ip_hash=ip, per_window=2)
    with pytest.raises(RateLimited):
        hit("votes", session_hash=uuid.uuid4().hex, ip_hash=ip, per_window=2)


def test_actions_count_separately(limit_cache):
    voter, ip = uuid.uuid4().hex, uuid.uuid4().hex
    hit("votes", session_hash=voter, ip_hash=ip, per_window=1)
    hit("battles", session_hash=voter, ip_hash=ip, per_window=1)
    with pytest.raises(RateLimited):
        hit("battles", session_hash=voter, ip_hash=ip, per_window=1)


def test_redis_keys_expire_with_the_window(redis_url, settings):
    import redis

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}
    }
    settings.ARENA_RATE_WINDOW_S = 60
    voter = uuid.uuid4().hex
    hit("votes", session_hash=voter, ip_hash=uuid.uuid4().hex, per_window=5)
    client = redis.Redis.from_url(redis_url)
    keys = [k for k in client.scan_iter(match=f"*rate:votes:session:{voter}:*")]
    assert len(keys) == 1
    assert 0 < client.ttl(keys[0]) <= 65
    # Django's own cache API reads the counter the pipeline wrote.
    assert caches["default"].get(keys[0].decode().split(":", 2)[2]) == 1


@pytest.mark.parametrize(
    ("hops", "forwarded", "expected"),
    [
        (0, "203.0.113.9", "10.0.0.2"),  # no proxy trusted: the header is ignored
        (1, "203.0.113.9", "203.0.113.9"),
        (1, "1.2.3.4, 203.0.113.9", "203.0.113.9"),  # the client's own entry (left) proves nothing
        (2, "1.2.3.4, 203.0.113.9, 10.0.0.7", "203.0.113.9"),
        (1, "", "10.0.0.2"),
        (2, "203.0.113.9", "10.0.0.2"),  # fewer entries than proxies
        (1, "not-an-ip", "10.0.0.2"),
        (1, "<script>alert(1)</script>", "10.0.0.2"),
        (1, "2001:db8::1", "2001:db8::1"),
        (1, "1.2.3.4," * 5000, "10.0.0.2"),  # absurdly long: cut, and the cut entry is no address
    ],
)
def test_client_ip_trusts_only_the_configured_proxies(settings, rf, hops, forwarded, expected):
    from common.client import client_ip

    settings.TRUSTED_PROXY_COUNT = hops
    request = rf.post("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


@pytest.mark.django_db
def test_limits_are_counted_in_the_database_while_redis_is_down(settings):
    """Nothing listens where the cache is configured (Redis restarting): the limits still hold, from
    the battles, turns and votes the voter has in the database (a vote is a battle marked voted)."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}  # fmt: skip
    settings.ARENA_RATE_WINDOW_S = 60
    settings.ARENA_IP_MULTIPLIER = 3
    a, b = (LanguageModel.objects.create(name=n, in_arena=True) for n in ("north", "south"))
    voter, ip = uuid.uuid4().hex, uuid.uuid4().hex
    for status in ("voted", "voted", "active"):
        battle = Battle.objects.create(model_a=a, model_b=b, session_hash=voter, ip_hash=ip, status=status)
        Turn.objects.create(battle=battle, index=0, prompt="hi")
    hit("votes", session_hash=voter, ip_hash=ip, per_window=3)  # 2 voted + this one
    with pytest.raises(RateLimited):
        hit("votes", session_hash=voter, ip_hash=ip, per_window=2)
    hit("battles", session_hash=voter, ip_hash=ip, per_window=4)  # 3 turns + this one
    with pytest.raises(RateLimited):
        hit("battles", session_hash=voter, ip_hash=ip, per_window=3)
    # Another session at the same address: its own count is 0, the address's 3 of 3 x 3 allowed.
    hit("battles", session_hash=uuid.uuid4().hex, ip_hash=ip, per_window=3)
