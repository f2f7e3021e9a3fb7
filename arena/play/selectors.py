"""Reading battles for their voter: what the page and the WebSocket may show."""

from __future__ import annotations

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
    turns = [
        {
            "index": turn.index,
            "prompt": turn.prompt,
            "a": {"text": turn.answer_a, "status": turn.status_a, "cut": turn.cut_a},
            "b": {"text": turn.answer_b, "status": turn.status_b, "cut": turn.cut_b},
        }
        for turn in Turn.objects.filter(battle=battle).order_by("index")
    ]
    state = {"battle": battle_id(battle.public_id), "status": battle.status, "turns": turns}
    vote = getattr(battle, "vote", None)
    if vote is not None:
        state["reveal"] = reveal(battle)
        state["winner"] = vote.winner
    return state


def reveal(battle: Battle) -> dict:
    """The names, for after the vote."""
    vote = battle.vote
    return {
        "model_a": battle.model_a.name,
        "model_b": battle.model_b.name,
        "counted": vote.counted,
        "excluded_reason": vote.excluded_reason,
    }
