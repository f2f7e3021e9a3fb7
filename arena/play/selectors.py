"""Reading battles for their voter: what the page and the WebSocket may show."""

from __future__ import annotations

from django.db.models import Count, Q

from arena.models import Battle, Turn
from arena.play.identity import salted_hash
from common.public_ids import battle_id


def battle_state(*, public_id, session_key: str) -> dict | None:
    """The voter's view of their battle, or None if it is not theirs (or does not exist).

    Model names appear only once the battle has a vote.
    """
    session_hash = salted_hash(session_key, purpose="session")
    battle = (
        Battle.objects.select_related("model_a", "model_b", "vote")
        .filter(public_id=public_id, session_hash=session_hash)
        .first()
    )
    if battle is None:
        return None
    models = {"a": battle.model_a, "b": battle.model_b}
    turns = []
    for turn in Turn.objects.filter(battle=battle).order_by("index"):
        entry = {"index": turn.index, "prompt": turn.prompt}
        for side in ("a", "b"):
            entry[side] = {
                "text": getattr(turn, f"answer_{side}"),
                "status": getattr(turn, f"status_{side}"),
                "cut": getattr(turn, f"cut_{side}"),  # stopped at the token limit
            }
        pending = [side for side in ("a", "b") if entry[side]["status"] == Turn.SideStatus.PENDING]
        if pending:
            # One figure for both waiting sides, the longer wait: two different places in line would tell
            # the voter that the models are served from different queues (a model's own GPU, say), a
            # hint at which model is which before the vote.
            ahead = max(answers_ahead(turn, models[side].queue_suffix) for side in pending)
            for side in pending:
                entry[side]["queue"] = {"ahead": ahead}
        turns.append(entry)
    state = {"battle": battle_id(battle.public_id), "status": battle.status, "turns": turns}
    vote = getattr(battle, "vote", None)
    if vote is not None:
        state["reveal"] = reveal(battle)
        state["winner"] = vote.winner
    return state


def answers_ahead(turn: Turn, queue_suffix: str) -> int:
    """How many answers wait for a generation worker ahead of a pending side of ``turn``: the sides
    still pending on turns created before it whose model is served from the same queue (the page's
    "queued, N ahead"). Sides being answered are not counted; they hold a worker already."""
    waiting = {
        side: Count("pk", filter=Q(**{f"status_{side}": Turn.SideStatus.PENDING,
                                     f"battle__model_{side}__queue_suffix": queue_suffix}))
        for side in ("a", "b")
    }  # fmt: skip
    counts = Turn.objects.filter(created_at__lt=turn.created_at).aggregate(**waiting)  # one query per poll
    return counts["a"] + counts["b"]


def reveal(battle: Battle) -> dict:
    """The names, for after the vote."""
    vote = battle.vote
    return {
        "model_a": battle.model_a.name,
        "model_b": battle.model_b.name,
        "counted": vote.counted,
        "excluded_reason": vote.excluded_reason,
    }
