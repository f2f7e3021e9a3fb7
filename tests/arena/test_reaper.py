"""The reaper fails battle sides no worker answered in time, and a late task cannot revive them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from arena.models import Battle, LanguageModel, Turn
from arena.play.generation import turn_side_finish, turn_side_progress, turn_side_start, turns_reap_stale
from arena.tasks import sides_reap

pytestmark = pytest.mark.django_db


def battle_with_turn(age_s: float, **sides) -> Turn:
    a, b = (LanguageModel.objects.get_or_create(name=n, defaults={"in_arena": True})[0] for n in ("north", "south"))
    battle = Battle.objects.create(model_a=a, model_b=b, session_hash="s", ip_hash="i")
    turn = Turn.objects.create(battle=battle, index=0, prompt="hi", **sides)
    Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(seconds=age_s))
    return turn


def test_stale_live_sides_are_failed_and_fresh_or_finished_ones_kept(settings):
    stale = battle_with_turn(400, status_a="streaming", answer_a="Par", status_b="done", answer_b="Paris.")
    fresh = battle_with_turn(10, status_a="streaming")
    finished = battle_with_turn(400, status_a="done", status_b="error")
    reaped = turns_reap_stale(older_than_s=300)
    assert reaped == [(stale.battle.public_id.hex, 0, "a")]
    stale.refresh_from_db()
    assert (stale.status_a, stale.answer_a, stale.status_b) == ("error", "Par", "done")
    assert "no answer within 300 s" in stale.error_a
    assert Battle.objects.get(pk=stale.battle_id).status == "failed"
    assert Turn.objects.get(pk=fresh.pk).status_a == "streaming"
    assert Battle.objects.get(pk=finished.battle_id).status == "active"
    assert turns_reap_stale(older_than_s=300) == []  # nothing left to do

    # The lost task turns up after all: it cannot write over the failure, nor start again.
    assert turn_side_progress(stale.pk, "a", "Paris, the") is False
    assert turn_side_finish(stale.pk, "a", "Paris, the capital.") is False
    assert turn_side_start(stale.pk, "a") is None
    assert Turn.objects.get(pk=stale.pk).answer_a == "Par"


def test_the_periodic_task_reaps_with_the_configured_age(settings):
    settings.ARENA_SIDE_STALE_S = 60
    turn = battle_with_turn(120)  # both sides still pending: their tasks never reached a worker
    assert sides_reap() == 2  # the browsers are told through the (in-memory) channel layer
    turn.refresh_from_db()
    assert turn.status_a == turn.status_b == "error"
