"""One side's answer to a turn, as the generation task records it: start, progress, finish, fail."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from arena.models import Battle, Turn
from arena.play.base import SIDES
from common.public_ids import battle_id

LIVE = (Turn.SideStatus.PENDING, Turn.SideStatus.STREAMING)


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


def turn_side_progress(turn_id: int, side: str, text: str) -> bool:
    """Store the text so far; False when the side is over already (the reaper failed it): stop then."""
    return bool(Turn.objects.filter(pk=turn_id, **{f"status_{side}__in": LIVE}).update(**{f"answer_{side}": text}))


def turn_side_finish(turn_id: int, side: str, text: str, *, cut: bool = False) -> bool:
    """Mark the side done, ``cut`` when the answer stopped at the model's token limit; False (and nothing
    written) when it was failed meanwhile (by the reaper)."""
    return bool(
        Turn.objects.filter(pk=turn_id, **{f"status_{side}__in": LIVE}).update(
            **{f"answer_{side}": text, f"status_{side}": Turn.SideStatus.DONE, f"finished_{side}": timezone.now(),
               f"cut_{side}": bool(cut)}  # fmt: skip
        )
    )


@transaction.atomic
def turn_side_fail(turn_id: int, side: str, text: str, error: str) -> None:
    """Record a failed side; the battle is marked failed and never rated. The other side goes on."""
    turn = Turn.objects.select_for_update().get(pk=turn_id)
    _side_fail(turn, side, text, error)


def _side_fail(turn: Turn, side: str, text: str, error: str) -> None:
    """Fail one side of a turn the caller holds locked, and its battle."""
    setattr(turn, f"answer_{side}", text)
    setattr(turn, f"status_{side}", Turn.SideStatus.ERROR)
    setattr(turn, f"error_{side}", error[:300])
    setattr(turn, f"finished_{side}", timezone.now())
    turn.save()
    Battle.objects.filter(pk=turn.battle_id).update(status=Battle.Status.FAILED, excluded_reason="generation_error")



def turns_reap_stale(*, older_than_s: float, limit: int = 500) -> list[tuple[str, int, str]]:
    """Fail every side still pending or streaming on a turn created more than ``older_than_s`` ago.

    Its task was lost (a worker killed mid-generation, a message the broker dropped) or is running
    far past the generation time limit: without this the battle would show "answering" forever. A
    task that comes back later finds the side over and stops (:func:`turn_side_progress`). Returns
    ``(battle public id, turn index, side)`` for each side failed, so the caller can tell browsers.
    """
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    live = Q(status_a__in=LIVE) | Q(status_b__in=LIVE)
    stale = list(Turn.objects.filter(live, created_at__lt=cutoff).order_by("pk").values_list("pk", flat=True)[:limit])
    reaped: list[tuple[str, int, str]] = []
    error = f"no answer within {older_than_s:.0f} s (its worker was lost or too slow)"
    for turn_id in stale:
        with transaction.atomic():
            turn = Turn.objects.select_for_update().select_related("battle").filter(pk=turn_id).first()
            for side in SIDES if turn is not None else ():
                if not turn.side_done(side):  # finished while we were not holding the lock: keep it
                    _side_fail(turn, side, getattr(turn, f"answer_{side}"), error)
                    reaped.append((battle_id(turn.battle.public_id), turn.index, side))
    return reaped
