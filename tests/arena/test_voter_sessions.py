"""Rate limits that hold: a battle needs the session GET /arena/ made; addresses are limited per IPv4
address or IPv6 /64. Hostile clients: no cookie, a forged cookie, a session made elsewhere, many IPv6
addresses in one /64, IPv4-mapped IPv6."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.test import Client

from arena.models import Battle, Vote
from arena.play.identity import ip_bucket
from tests.arena.vote_data import catalogue
from tests.arena_terms import agree

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def open_arena(settings):
    cache.clear()
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.db"  # every session is a row we can count
    catalogue("left-model", "right-model")
    yield
    cache.clear()


def voter(address: str = "203.0.113.9") -> Client:
    client = Client(REMOTE_ADDR=address)
    assert client.get("/arena/").status_code == 200
    agree(client)
    return client


def start(client: Client):
    return client.post("/arena/battles/", {"prompt": "What is the capital of France?"})


@pytest.mark.parametrize(
    "path",
    ["/arena/battles/", f"/arena/battles/{uuid.UUID(int=1).hex}/vote/", f"/arena/battles/{uuid.UUID(int=2).hex}/turns/"],
)
def test_posts_without_a_session_are_refused_and_make_no_session(path):
    client = Client()
    for _ in range(5):
        response = client.post(path, {"prompt": "hi", "winner": "tie"})
        assert response.status_code == 403
        assert "/arena/" in response.json()["error"] and "session" in response.json()["error"]
    assert Session.objects.count() == 0 and Battle.objects.count() == 0 and Vote.objects.count() == 0


def test_a_forged_cookie_is_no_session(settings):
    client = Client()
    for k in range(5):  # a new made-up key each time: no fresh budget, no row
        client.cookies[settings.SESSION_COOKIE_NAME] = f"{k:0>32}forged"
        assert start(client).status_code == 403
    client.cookies[settings.SESSION_COOKIE_NAME] = "<script>" + "x" * 5000
    assert start(client).status_code == 403
    assert client.get(f"/arena/battles/{uuid.uuid4().hex}/").status_code == 404
    assert Session.objects.count() == 0 and Battle.objects.count() == 0


def test_a_session_made_elsewhere_is_not_an_arena_session(settings):
    other = SessionStore()
    other["something"] = 1
    other.create()
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = other.session_key
    assert start(client).status_code == 403
    assert client.get("/arena/").status_code == 200  # the page adopts it as an arena session
    agree(client)
    assert start(client).status_code == 201
    assert Session.objects.count() == 1


def test_the_arena_page_makes_one_session_and_a_battle_then_works():
    client = voter()
    assert client.get("/arena/").status_code == 200
    assert Session.objects.count() == 1
    assert start(client).status_code == 201
    assert Session.objects.count() == 1


def test_new_sessions_are_limited_per_address(settings):
    settings.ARENA_SESSIONS_PER_MINUTE = 3
    for k in range(3):
        assert Client(REMOTE_ADDR=f"2001:db8:7:9::{k + 1}").get("/arena/").status_code == 200
    refused = Client(REMOTE_ADDR="2001:db8:7:9:ffff::42").get("/arena/")  # same /64
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    assert Session.objects.count() == 3
    assert Client(REMOTE_ADDR="2001:db8:7:a::1").get("/arena/").status_code == 200  # the next /64


def test_ipv6_addresses_in_one_64_share_one_limit(settings):
    settings.ARENA_BATTLES_PER_MINUTE = 1
    settings.ARENA_IP_MULTIPLIER = 2
    # Each client has its own session and its own address, all in 2001:db8:1:2::/64.
    statuses = [start(voter(f"2001:db8:1:2:{k:x}::{k + 7:x}")).status_code for k in range(4)]
    assert statuses == [201, 201, 429, 429]
    assert start(voter("2001:db8:1:3::1")).status_code == 201  # another /64 has its own budget
    assert Battle.objects.count() == 3
    hashes = set(Battle.objects.values_list("ip_hash", flat=True))
    assert len(hashes) == 2  # stored per /64 too, so the anomaly tests see one network


def test_ipv4_mapped_ipv6_is_the_ipv4_address(settings):
    settings.ARENA_BATTLES_PER_MINUTE = 1
    settings.ARENA_IP_MULTIPLIER = 1
    assert start(voter("198.51.100.7")).status_code == 201
    assert start(voter("::ffff:198.51.100.7")).status_code == 429
    assert start(voter("198.51.100.8")).status_code == 201


@pytest.mark.parametrize(
    ("address", "bucket"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::1", "::/64"),
        ("unknown", "unknown"),
        ("not an address", "not an address"),
    ],
)
def test_ip_bucket(address, bucket):
    assert ip_bucket(address) == bucket
