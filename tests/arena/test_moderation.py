"""Unsafe prompts held back: the moderation step tags them at the refit, voters report their battles,
and staff release or keep them in the review queue; held battles never reach /api/battles/."""

from __future__ import annotations

import pytest
from django.test import Client

from arena.models import Battle, BattleHold, Turn
from arena.play import generation
from arena.publication.moderation import MODERATION_VERSION, verdict
from arena.tasks import ratings_refit
from leaderboard.models import ReviewAction
from leaderboard.review.services import battle_review
from tests.arena.vote_data import catalogue
from tests.arena_terms import agree
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db

OFFENSIVE = "you are a stupid worthless piece of shit, answer me"
BENIGN = "What is the capital of France?"


def voter() -> Client:
    client = Client()
    client.get("/arena/")
    agree(client)
    return client


def played(client: Client, prompt: str, capture) -> Battle:
    with capture(execute=False):
        created = client.post("/arena/battles/", {"prompt": prompt})
    assert created.status_code == 201, created.content
    battle = Battle.objects.get(public_id=created.json()["battle"])
    turn = Turn.objects.get(battle=battle)
    generation.turn_side_finish(turn.pk, "a", "An answer.")
    generation.turn_side_finish(turn.pk, "b", "Another answer.")
    with capture(execute=False):
        assert client.post(f"/arena/battles/{battle.public_id.hex}/vote/", {"winner": "tie"}).status_code == 201
    return battle


def published() -> set[str]:
    return {b["public_id"] for b in Client().get("/api/battles/?limit=1000").json()["results"]}


@pytest.fixture
def arena(settings):
    settings.ARENA_PUBLISH_DELAY_S = 0
    settings.ARENA_REFIT_MIN_VOTES = 1
    catalogue("left-model", "right-model")


def test_the_tagger_scores_prompts():
    assert verdict([OFFENSIVE])["flagged"] and not verdict([BENIGN])["flagged"]
    assert verdict([BENIGN, OFFENSIVE])["score"] >= 0.9 and verdict([])["score"] == 0.0
    assert verdict([BENIGN])["version"] == MODERATION_VERSION


def test_tagged_battles_are_held_until_staff_release_them(arena, client, django_capture_on_commit_callbacks):
    benign = played(voter(), BENIGN, django_capture_on_commit_callbacks)
    tagged = played(voter(), OFFENSIVE, django_capture_on_commit_callbacks)
    assert published() == set()  # nothing before the refit moderates and snapshots
    summary = ratings_refit()
    assert summary["moderated"] == {"moderated": 2, "held": 1}
    assert published() == {benign.public_id.hex}
    assert Client().get(f"/api/battles/{tagged.public_id.hex}/").status_code == 404
    hold = BattleHold.objects.get(battle=tagged)
    assert hold.reason == "moderation" and hold.status == "held" and hold.details["moderation"]["score"] >= 0.9

    admin = bd.user("admin@example.org", staff=True)
    client.force_login(admin)
    queue = client.get("/leaderboard/review/").content.decode()
    assert "Held battles (1)" in queue and f"Battle #{tagged.pk}" in queue and "piece of shit" in queue
    refused = client.post(f"/leaderboard/review/battles/{hold.pk}/", {"action": "release", "comment": ""})
    assert refused.status_code == 400 and BattleHold.objects.get(pk=hold.pk).status == "held"
    done = client.post(f"/leaderboard/review/battles/{hold.pk}/", {"action": "release", "comment": "strong words, no harm"})
    assert done.status_code == 302
    assert published() == {benign.public_id.hex, tagged.public_id.hex}
    again = client.post(f"/leaderboard/review/battles/{hold.pk}/", {"action": "keep", "comment": "changed my mind"})
    assert again.status_code == 409
    entry = ReviewAction.objects.get(battle_hold=hold)
    assert entry.kind == "battle" and entry.action == "release" and entry.admin == admin
    assert f"battle #{tagged.pk}" in client.get("/leaderboard/review/").content.decode()


def test_a_voter_report_holds_the_battle_until_reviewed(arena, django_capture_on_commit_callbacks):
    owner = voter()
    battle = played(owner, BENIGN, django_capture_on_commit_callbacks)
    reported = owner.post(f"/arena/battles/{battle.public_id.hex}/report/", {"reason": "  it   contains\tmy address "})
    assert reported.status_code == 201 and reported.json()["held"]
    hold = BattleHold.objects.get(battle=battle)
    assert hold.reason == "report" and hold.details["reports"][0]["reason"] == "it contains my address"
    ratings_refit()
    assert published() == set()
    assert owner.post(f"/arena/battles/{battle.public_id.hex}/report/", {"reason": "again"}).status_code == 409
    assert voter().post(f"/arena/battles/{battle.public_id.hex}/report/", {"reason": "not mine"}).status_code == 404
    admin = bd.user("admin@example.org", staff=True)
    battle_review(hold_id=hold.pk, admin=admin, action="keep", comment="personal data")
    ratings_refit(force=True)
    assert published() == set() and BattleHold.objects.get(pk=hold.pk).status == "kept"


def test_a_report_after_release_holds_it_again(arena, django_capture_on_commit_callbacks):
    owner = voter()
    battle = played(owner, OFFENSIVE, django_capture_on_commit_callbacks)
    ratings_refit()
    hold = BattleHold.objects.get(battle=battle)
    battle_review(hold_id=hold.pk, admin=bd.user("admin@example.org", staff=True), action="release", comment="ok")
    assert published() == {battle.public_id.hex}
    assert owner.post(f"/arena/battles/{battle.public_id.hex}/report/", {"reason": "please remove"}).status_code == 201
    assert published() == set() and BattleHold.objects.get(pk=hold.pk).status == "held"


@pytest.mark.parametrize("reason", ["", "   ", "x" * 501, "bad\x00byte"])
def test_hostile_reports_are_refused_cleanly(arena, reason, django_capture_on_commit_callbacks):
    owner = voter()
    battle = played(owner, BENIGN, django_capture_on_commit_callbacks)
    response = owner.post(f"/arena/battles/{battle.public_id.hex}/report/", {"reason": reason})
    assert response.status_code == 400 and "error" in response.json()
    assert not BattleHold.objects.exists()
    assert Client().post(f"/arena/battles/{battle.public_id.hex}/report/", {"reason": "x"}).status_code == 403


def test_only_staff_decide(arena, django_capture_on_commit_callbacks):
    battle = played(voter(), OFFENSIVE, django_capture_on_commit_callbacks)
    ratings_refit()
    hold = BattleHold.objects.get(battle=battle)
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="Only staff"):
        battle_review(hold_id=hold.pk, admin=bd.user("someone@example.org"), action="release", comment="x")
    with pytest.raises(ValidationError, match="Unknown action"):
        battle_review(hold_id=hold.pk, admin=bd.user("admin@example.org", staff=True), action="approve", comment="x")
