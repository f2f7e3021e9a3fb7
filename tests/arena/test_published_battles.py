"""/api/battles/ publishes a battle only once a snapshot made at least ARENA_PUBLISH_DELAY_S after its
vote covers it; the voter still sees their own battle, names and all, right after voting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from arena.models import Battle, RatingSnapshot, Turn, Vote
from arena.play.identity import salted_hash
from arena.publication.holds import battles_moderate
from arena.publication.selectors import battles_published_until
from tests.arena.vote_data import catalogue, votes_create
from tests.arena_terms import agree

pytestmark = pytest.mark.django_db

DAY = 86400


def snapshot(*, created_at, last_vote_at, method="bt", category="overall") -> RatingSnapshot:
    snap = RatingSnapshot.objects.create(
        method=method, category=category, vote_count=1, last_vote_at=last_vote_at, rows=[]
    )
    RatingSnapshot.objects.filter(pk=snap.pk).update(created_at=created_at)  # auto_now_add: set it after
    return snap


def listed(client) -> set[str]:
    battles_moderate()  # what the refit does before a snapshot: nothing unmoderated is published
    data = client.get("/api/battles/?limit=1000").json()
    return {b["public_id"] for b in data["results"]}


def test_nothing_is_published_before_a_snapshot(client, settings):
    settings.ARENA_PUBLISH_DELAY_S = DAY
    votes = votes_create({"a": 0.0, "b": 0.0}, 5, with_turns=True)
    assert battles_published_until(DAY) is None
    battles_moderate()
    assert client.get("/api/battles/").json()["count"] == 0
    missing = client.get(f"/api/battles/{votes[0].battle.public_id.hex}/")
    assert missing.status_code == 404 and "published" in missing.json()["detail"]


def test_only_votes_covered_by_a_snapshot_made_after_the_delay(client, settings):
    settings.ARENA_PUBLISH_DELAY_S = DAY
    now = timezone.now()
    old = votes_create({"a": 0.0, "b": 0.0}, 6, start=now - timedelta(days=3), with_turns=True)
    recent = votes_create({"a": 0.0, "b": 0.0}, 4, seed=1, start=now - timedelta(hours=2), with_turns=True)
    # A snapshot made now covers every vote, but the recent ones are younger than the delay.
    snapshot(created_at=now, last_vote_at=recent[-1].created_at)
    # Another snapshot (another category) made two days ago covering only three old votes changes nothing.
    snapshot(created_at=now - timedelta(days=2), last_vote_at=old[2].created_at, category="multi_turn")
    ids = listed(client)
    assert ids == {v.battle.public_id.hex for v in old}
    for vote in recent:
        assert client.get(f"/api/battles/{vote.battle.public_id.hex}/").status_code == 404
    assert client.get(f"/api/battles/{old[0].battle.public_id.hex}/").status_code == 200
    # The delay is a setting: with none, the snapshot publishes everything it covers.
    settings.ARENA_PUBLISH_DELAY_S = 0
    assert listed(client) == {v.battle.public_id.hex for v in old + recent}


def test_votes_after_the_snapshot_wait_for_the_next_one(client, settings):
    settings.ARENA_PUBLISH_DELAY_S = DAY
    now = timezone.now()
    votes = votes_create({"a": 0.0, "b": 0.0}, 6, start=now - timedelta(days=10), with_turns=True)
    snapshot(created_at=now - timedelta(days=5), last_vote_at=votes[3].created_at)
    assert listed(client) == {v.battle.public_id.hex for v in votes[:4]}
    snapshot(created_at=now, last_vote_at=votes[-1].created_at)
    assert listed(client) == {v.battle.public_id.hex for v in votes}


def test_the_voter_sees_their_own_battle_at_once(settings):
    settings.ARENA_PUBLISH_DELAY_S = DAY
    voter = Client()
    voter.get("/arena/")
    agree(voter)
    models = catalogue("left-model", "right-model")
    session_hash = salted_hash(voter.session.session_key, purpose="session")
    battle = Battle.objects.create(
        model_a=models["left-model"], model_b=models["right-model"], session_hash=session_hash, ip_hash="i",
        status=Battle.Status.VOTED,
    )  # fmt: skip
    Turn.objects.create(battle=battle, index=0, prompt="a prompt", answer_a="x", answer_b="y",
                        status_a="done", status_b="done")  # fmt: skip
    Vote.objects.create(
        battle=battle, model_a=battle.model_a, model_b=battle.model_b, winner="model_a", model_a_position="left",
        turn_count=1, battle_started_at=timezone.now(), style_a={}, style_b={}, session_hash=session_hash,
        ip_hash="i",
    )  # fmt: skip
    snapshot(created_at=timezone.now(), last_vote_at=timezone.now())
    battles_moderate()
    own = voter.get(f"/arena/battles/{battle.public_id.hex}/")
    assert own.status_code == 200 and own.json()["reveal"]["model_a"] == "left-model"
    assert voter.get(f"/api/battles/{battle.public_id.hex}/").status_code == 404  # not yet public
    assert Client().get(f"/arena/battles/{battle.public_id.hex}/").status_code == 404  # nor someone else's
