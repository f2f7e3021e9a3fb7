"""Names on the channel layer shared by the generation task (publisher) and the consumer (reader)."""

from __future__ import annotations


def battle_group(public_id) -> str:
    """The channel-layer group of a battle's browsers (a UUID: reveals nothing)."""
    return f"battle.{public_id}"
