"""Arena services: everything that writes, one module per domain.

``battles``     start a battle (pick a pair, queue both answers), find a voter's battle, add a turn
``generation``  one side's answer as the generation task records it
``votes``       cast the vote (the hot path: two database round trips on PostgreSQL)
``refits``      a committed vote asks for a debounced ratings refit
``voters``      the anomalous-voter test's flags, and admins' decisions on voters and identity votes
``redaction``   store the redacted texts of published battles (personal data and secrets replaced)
``moderation``  hold battles back from publication: moderation tags, voters' reports, staff decisions
``base``        the refusal type (:class:`ArenaError`), the two sides, prompt cleaning

Work for workers is enqueued by name through :mod:`arena.dispatch`; services never import tasks.
The public names are re-exported here (``arena.services.vote_cast``).
"""

from arena.services.base import SIDES, ArenaError, prompt_clean
from arena.services.battles import arena_candidates, battle_create, battle_for_voter, turn_add
from arena.services.generation import (
    conversation_for_side,
    turn_side_fail,
    turn_side_finish,
    turn_side_progress,
    turn_side_start,
)
from arena.services.moderation import battle_hold_decide, battle_report, battles_moderate
from arena.services.redaction import published_redact
from arena.services.refits import exclusions_refit_request, refit_request
from arena.services.voters import vote_identity_decide, voter_flag_decide, voters_flag
from arena.services.votes import CastVote, reveals_identity, side_style, vote_cast

__all__ = [
    "SIDES",
    "ArenaError",
    "CastVote",
    "published_redact",
    "battle_hold_decide",
    "battle_report",
    "battles_moderate",
    "arena_candidates",
    "battle_create",
    "battle_for_voter",
    "conversation_for_side",
    "prompt_clean",
    "exclusions_refit_request",
    "refit_request",
    "reveals_identity",
    "side_style",
    "turn_add",
    "turn_side_fail",
    "turn_side_finish",
    "turn_side_progress",
    "turn_side_start",
    "vote_cast",
    "vote_identity_decide",
    "voter_flag_decide",
    "voters_flag",
]
