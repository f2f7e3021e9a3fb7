"""Names on the channel layer shared by the generation task (publisher) and the consumer (reader)."""

from __future__ import annotations

from common.public_ids import battle_id


def battle_group(public_id) -> str:
    """The channel-layer group of a battle's browsers (its public id, either form: reveals nothing)."""
    return f"battle.{battle_id(public_id)}"
