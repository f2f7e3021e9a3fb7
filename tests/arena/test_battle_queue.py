"""What the arena page says while a side waits: its place in the queue of its generation worker.

A pending side counts the sides still pending on turns created before it whose model is answered on the
same queue (``generate`` or ``generate.<suffix>``); sides being answered hold a worker and do not count.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from arena.models import Battle, LanguageModel, Turn
from arena.play.identity import salted_hash
from arena.play.selectors import answers_ahead, battle_state
from arena.publication.consent import publish_when

pytestmark = pytest.mark.django_db


def battle_with_turn(a, b, key, *, minutes_ago, status_a="pending", status_b="pending"):
    battle = Battle.objects.create(model_a=a, model_b=b, session_hash=salted_hash(key, purpose="session"), ip_hash="i")
    turn = Turn.objects.create(battle=battle, index=0, prompt=f"prompt of {key}", status_a=status_a, status_b=status_b)
    Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    turn.refresh_from_db()
    return battle, turn


def test_a_pending_side_counts_the_pending_sides_ahead_of_it_on_its_queue():
    shared_1 = LanguageModel.objects.create(name="shared-one", in_arena=True)
    shared_2 = LanguageModel.objects.create(name="shared-two", in_arena=True)
    own = LanguageModel.objects.create(name="own-gpu", in_arena=True, queue_suffix="gpu")
    battle_with_turn(shared_1, shared_2, "first", minutes_ago=5)  # two sides waiting on generate
    battle_with_turn(shared_1, own, "second", minutes_ago=4, status_a="streaming")  # A answering, B waits on .gpu
    battle_with_turn(shared_2, shared_1, "third", minutes_ago=3, status_a="done", status_b="error")
    mine, turn = battle_with_turn(own, shared_2, "mine", minutes_ago=1)
    battle_with_turn(shared_1, shared_2, "later", minutes_ago=0)  # after mine: not ahead of it

    # A waits behind the gpu side of "second" (1), B behind both sides of "first" (2; "second"'s A is
    # answered already). The voter sees one figure for both, the longer wait: two different places in
    # line would tell them the models are served from different queues, a hint at which is which.
    assert answers_ahead(turn, "") == 2 and answers_ahead(turn, "gpu") == 1 and answers_ahead(turn, "other") == 0
    sides = battle_state(public_id=mine.public_id, session_key="mine")["turns"][0]
    assert sides["a"]["queue"] == sides["b"]["queue"] == {"ahead": 2}

    # The first battle's sides start: both of the voter's sides are shown one ahead (A's gpu wait).
    Turn.objects.filter(battle__session_hash=salted_hash("first", purpose="session")).update(
        status_a="streaming", status_b="streaming"
    )
    sides = battle_state(public_id=mine.public_id, session_key="mine")["turns"][0]
    assert answers_ahead(turn, "") == 0 and sides["a"]["queue"] == sides["b"]["queue"] == {"ahead": 1}


def test_only_waiting_sides_carry_a_queue_and_no_name_leaks_before_the_vote():
    a = LanguageModel.objects.create(name="alpha-secret", in_arena=True)
    b = LanguageModel.objects.create(name="beta-secret", in_arena=True)
    battle, _ = battle_with_turn(a, b, "voter", minutes_ago=1, status_a="streaming", status_b="done")
    state = battle_state(public_id=battle.public_id, session_key="voter")
    assert "queue" not in state["turns"][0]["a"] and "queue" not in state["turns"][0]["b"]
    assert "secret" not in repr(state)
    assert battle_state(public_id=battle.public_id, session_key="someone-else") is None


@pytest.mark.parametrize(
    ("delay_s", "said"),
    [
        (0, "at the first rating refit after your vote"),
        (59, "at the first rating refit after your vote"),
        (60, "about 1 minute after your vote"),
        (1800, "about 30 minutes after your vote"),
        (3600, "about 1 hour after your vote"),
        (5400, "about 1.5 hours after your vote"),
        (86400, "about 24 hours after your vote"),
        (7 * 86400, "about 7 days after your vote"),
    ],
)
def test_the_terms_say_when_a_battle_is_published_in_words(delay_s, said):
    assert publish_when(delay_s).startswith(said)


def test_the_terms_never_say_about_0_hours(client, settings):
    settings.ARENA_PUBLISH_DELAY_S = 0
    page = client.get("/arena/terms/").content.decode()
    assert "0 hours" not in page and "at the first rating refit after your vote" in page
    settings.ARENA_PUBLISH_DELAY_S = 86400
    assert "about 24 hours after your vote" in client.get("/arena/").content.decode()
