"""Voters agree to the arena's terms before their first message; without it nothing starts (views,
WebSocket), hostile versions are refused cleanly, and a new version of the terms asks again."""

from __future__ import annotations

import asyncio

import pytest
from django.test import Client

from arena.models import Battle, Turn, Vote
from arena.play import generation
from tests.arena.test_battle_flow import arena_models  # noqa: F401 - the fixture
from tests.arena.test_consumer import communicator, cookie_of, voter_with_battle
from tests.arena_terms import agree

pytestmark = pytest.mark.django_db(transaction=True)


def opened() -> Client:
    client = Client()
    assert client.get("/arena/").status_code == 200
    return client


def test_the_page_shows_the_terms_until_the_voter_agrees(settings, arena_models):  # noqa: F811
    client = opened()
    page = client.get("/arena/").content.decode()
    assert 'id="terms"' in page and "What is published, and when" in page and 'data-consented="false"' in page
    assert f"Terms version {settings.ARENA_TERMS_VERSION}" in page
    refused = client.post("/arena/battles/", {"prompt": "hi"})
    assert refused.status_code == 403 and "Agree to the arena's terms first" in refused.json()["error"]
    assert Battle.objects.count() == 0
    agree(client)
    page = client.get("/arena/").content.decode()
    assert 'data-consented="true"' in page and 'id="terms" class="terms" aria-label="Arena terms" data-version' in page
    assert "hidden>" in page.split('id="terms"')[1].split("\n")[0]
    assert client.get("/arena/terms/").status_code == 200


def test_battles_and_votes_carry_the_agreement(settings, arena_models, django_capture_on_commit_callbacks):  # noqa: F811
    client = opened()
    agreed = agree(client).json()
    with django_capture_on_commit_callbacks(execute=False):
        created = client.post("/arena/battles/", {"prompt": "What is the capital of France?"})
    assert created.status_code == 201, created.content
    battle = Battle.objects.get(public_id=created.json()["battle"])
    assert battle.consent_version == settings.ARENA_TERMS_VERSION and battle.consent_at.isoformat() == agreed["at"]
    for side in ("a", "b"):
        generation.turn_side_finish(Turn.objects.get(battle=battle).pk, side, "Paris.")
    voted = client.post(f"/arena/battles/{battle.public_id.hex}/vote/", {"winner": "tie"})
    assert voted.status_code == 201, voted.content
    vote = Vote.objects.get()
    assert vote.consent_version == settings.ARENA_TERMS_VERSION and vote.consent_at == battle.consent_at


def test_a_new_version_of_the_terms_asks_again(settings, arena_models, django_capture_on_commit_callbacks):  # noqa: F811
    client = opened()
    agree(client)
    settings.ARENA_TERMS_VERSION = "2027-01-01"
    refused = client.post("/arena/battles/", {"prompt": "hi"})
    assert refused.status_code == 403 and "version 2027-01-01" in refused.json()["error"]
    assert 'data-consented="false"' in client.get("/arena/").content.decode()
    old = client.post("/arena/consent/", {"version": "2026-12-03"})
    assert old.status_code == 409 and "The terms changed" in old.json()["error"]
    agree(client)
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post("/arena/battles/", {"prompt": "hi"}).status_code == 201
    assert Battle.objects.get().consent_version == "2027-01-01"


@pytest.mark.parametrize("version", ["", " ", "x" * 41, "\x00\x01", "<script>alert(1)</script>", "🙂" * 10])
def test_hostile_consent_requests_are_refused_cleanly(version):
    client = opened()
    response = client.post("/arena/consent/", {"version": version})
    assert response.status_code in (400, 409) and "error" in response.json()
    assert client.post("/arena/battles/", {"prompt": "hi"}).status_code == 403
    no_session = Client().post("/arena/consent/", {"version": "2026-12-03"})
    assert no_session.status_code == 403 and "open /arena/ first" in no_session.json()["error"]


def test_the_websocket_refuses_a_session_without_the_current_agreement(settings):
    client, public_id = voter_with_battle()

    async def connect():
        ws = communicator(public_id, cookie_of(client))
        connected, code = await ws.connect(timeout=60)
        await ws.disconnect()
        return connected, code

    assert asyncio.run(connect())[0]  # agreed to the current terms: streamed
    settings.ARENA_TERMS_VERSION = "2027-01-01"
    assert asyncio.run(connect()) == (False, 4451)
