"""Battles: start one (pick a pair, store it, queue both answers), find a voter's own, add a turn.

Names of the models never appear in what these return to a voter before the vote.
"""

from __future__ import annotations

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count

from arena.models import Battle, LanguageModel, Turn, Vote
from arena.play.base import SIDES, UNAVAILABLE_RETRY_S, ArenaError, prompt_clean
from arena.play.dispatch import generation_enqueue
from arena.play.generation import turn_side_fail
from arena.play.sampling import Candidate, sample_pair
from arena.publication.consent import consent_fields


def arena_candidates() -> list[Candidate]:
    """The models that may battle: declared in the arena and not retired."""
    models = LanguageModel.objects.filter(in_arena=True, retired_at__isnull=True)
    counts_a = dict(Vote.objects.values_list("model_a").annotate(n=Count("id")))
    counts_b = dict(Vote.objects.values_list("model_b").annotate(n=Count("id")))
    return [
        Candidate(key=m.pk, weight=m.weight, family=m.family, votes=counts_a.get(m.pk, 0) + counts_b.get(m.pk, 0))
        for m in models
    ]



@transaction.atomic
def battle_create(*, prompt: object, session_hash: str, ip_hash: str, rng: np.random.Generator | None = None,
                  consent: dict | None = None) -> Battle:  # fmt: skip
    """Pick two models, create the battle and its first turn, and queue both answers."""
    prompt = prompt_clean(prompt)
    rng = rng if rng is not None else np.random.default_rng()
    try:
        left, right = sample_pair(
            arena_candidates(),
            rng=rng,
            new_model_votes=settings.ARENA_NEW_MODEL_VOTES,
            boost=settings.ARENA_NEW_MODEL_BOOST,
        )
    except ValueError as exc:
        raise ArenaError(f"The arena is not open: {exc}.", status=503) from None
    battle = Battle(model_a_id=left.key, model_b_id=right.key, session_hash=session_hash, ip_hash=ip_hash,
                    **consent_fields(consent))  # fmt: skip
    battle.full_clean()
    battle.save()
    turn = Turn.objects.create(battle=battle, index=0, prompt=prompt)
    generation_enqueue(turn, on_failure=lambda exc: _unqueued(turn))
    return battle


def _unqueued(turn: Turn) -> None:
    """The broker refused the turn's answers: fail both sides now (nothing would ever answer them) and
    tell the voter to try again shortly, with a 503 rather than a battle that never streams."""
    for side in SIDES:
        turn_side_fail(turn.pk, side, "", "the answers could not be queued (the task broker is unavailable)")
    raise ArenaError(
        "The arena cannot start answers right now (its task queue is unavailable); try again in a minute.",
        status=503,
        retry_after=UNAVAILABLE_RETRY_S * 6,
    )


def battle_for_voter(public_id, *, session_hash: str, lock: bool = False) -> Battle:
    """The voter's own battle; another voter's battle is reported as missing, not as forbidden."""
    queryset = Battle.objects.select_related("model_a", "model_b")
    if lock:
        queryset = queryset.select_for_update(of=("self",))
    try:
        battle = queryset.get(public_id=public_id)
    except (Battle.DoesNotExist, ValidationError, ValueError):
        raise ArenaError("No such battle.", status=404) from None
    if battle.session_hash != session_hash:
        raise ArenaError("No such battle.", status=404)
    return battle


@transaction.atomic
def turn_add(*, public_id, prompt: object, session_hash: str) -> Turn:
    """Continue the conversation: both models answer the new message with the whole history."""
    prompt = prompt_clean(prompt)
    battle = battle_for_voter(public_id, session_hash=session_hash, lock=True)
    if battle.status != Battle.Status.ACTIVE:
        raise ArenaError("This battle is over: start a new round.", status=409)
    turns = list(battle.turns.all())
    if len(turns) >= settings.ARENA_MAX_TURNS:
        raise ArenaError(f"A battle has at most {settings.ARENA_MAX_TURNS} turns: vote, or start a new round.", status=409)
    if not all(turn.side_done(side) for turn in turns for side in SIDES):
        raise ArenaError("Wait until both models have answered.", status=409)
    turn = Turn.objects.create(battle=battle, index=len(turns), prompt=prompt)
    generation_enqueue(turn, on_failure=lambda exc: _unqueued(turn))
    return turn

