"""One side's answer to a turn, as the generation task records it: start, progress, finish, fail."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from arena.models import Battle, Turn


def conversation_for_side(turn: Turn, side: str) -> list[dict]:
    """The chat messages one side sees for ``turn``: earlier prompts with its own earlier answers."""
    messages: list[dict] = []
    for earlier in turn.battle.turns.filter(index__lt=turn.index).order_by("index"):
        messages.append({"role": "user", "content": earlier.prompt})
        messages.append({"role": "assistant", "content": getattr(earlier, f"answer_{side}")})
    messages.append({"role": "user", "content": turn.prompt})
    return messages


def turn_side_start(turn_id: int, side: str) -> Turn | None:
    """Mark a side as streaming; None when it already finished (a retried task does nothing)."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().select_related("battle").get(pk=turn_id)
        if turn.side_done(side):
            return None
        setattr(turn, f"status_{side}", Turn.SideStatus.STREAMING)
        setattr(turn, f"answer_{side}", "")
        turn.save(update_fields=[f"status_{side}", f"answer_{side}"])
    return turn


def turn_side_progress(turn_id: int, side: str, text: str) -> None:
    Turn.objects.filter(pk=turn_id).update(**{f"answer_{side}": text})


def turn_side_finish(turn_id: int, side: str, text: str) -> None:
    Turn.objects.filter(pk=turn_id).update(
        **{f"answer_{side}": text, f"status_{side}": Turn.SideStatus.DONE, f"finished_{side}": timezone.now()}
    )


@transaction.atomic
def turn_side_fail(turn_id: int, side: str, text: str, error: str) -> None:
    """Record a failed side; the battle is marked failed and never rated. The other side goes on."""
    turn = Turn.objects.select_for_update().get(pk=turn_id)
    setattr(turn, f"answer_{side}", text)
    setattr(turn, f"status_{side}", Turn.SideStatus.ERROR)
    setattr(turn, f"error_{side}", error[:300])
    setattr(turn, f"finished_{side}", timezone.now())
    turn.save()
    Battle.objects.filter(pk=turn.battle_id).update(status=Battle.Status.FAILED, excluded_reason="generation_error")

