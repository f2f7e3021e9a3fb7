"""Counted votes written straight through the ORM, drawn from known model strengths (for rating tests)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import numpy as np

from arena.models import Battle, LanguageModel, Turn, Vote

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def catalogue(*names: str) -> dict[str, LanguageModel]:
    return {n: LanguageModel.objects.get_or_create(name=n, defaults={"in_arena": True})[0] for n in names}


def votes_create(
    strengths: dict[str, float],
    n: int,
    *,
    seed: int = 0,
    tie_rate: float = 0.1,
    language: str | list[str] = "en",
    turn_count: int | list[int] = 1,
    prompt_tokens: int | list[int] = 20,
    verbose: dict[str, float] | None = None,
    counted: bool = True,
    pairs: list[tuple[str, str]] | None = None,
    with_turns: bool = False,
    start: datetime = T0,
) -> list[Vote]:
    """``n`` votes between random pairs with Bradley-Terry win probabilities from ``strengths`` (logits).

    ``verbose`` adds a logit bonus for the side whose answer is longer (tokens ~ 100 * (1 + bonus)),
    the bias style control should remove. Votes are one second apart from ``start``.
    """
    rng = np.random.default_rng(seed)
    models = catalogue(*strengths)
    names = list(strengths)
    verbose = verbose or {}
    battles, votes, turns = [], [], []
    for k in range(n):
        a, b = pairs[k % len(pairs)] if pairs else rng.choice(names, size=2, replace=False)
        tok_a = int(100 * (1 + verbose.get(a, 0.0)) + rng.integers(0, 20))
        tok_b = int(100 * (1 + verbose.get(b, 0.0)) + rng.integers(0, 20))
        logit = strengths[a] - strengths[b] + (0.8 if tok_a > tok_b else -0.8) * bool(verbose)
        u = rng.random()
        if u < tie_rate:
            winner = "tie" if rng.random() < 0.7 else "tie (bothbad)"
        else:
            winner = "model_a" if rng.random() < 1 / (1 + np.exp(-logit)) else "model_b"
        when = start + timedelta(seconds=k)
        battle = Battle(
            public_id=uuid.uuid4(), model_a=models[a], model_b=models[b], status=Battle.Status.VOTED,
            session_hash=f"s{k}", ip_hash="ip",
        )  # fmt: skip
        battles.append(battle)

        def pick(value, k=k):
            return value[k % len(value)] if isinstance(value, list) else value

        votes.append(
            Vote(
                model_a=models[a],
                model_b=models[b],
                winner=winner,
                model_a_position="left",
                turn_count=pick(turn_count),
                battle_started_at=when,
                language=pick(language),
                prompt_tokens=pick(prompt_tokens),
                session_hash=f"s{k}",
                ip_hash="ip",
                counted=counted,
                excluded_reason="" if counted else "identity_revealed",
                style_a={"tokens": tok_a, "headers": int(rng.integers(0, 3)), "list_items": 2, "bold": 1},
                style_b={"tokens": tok_b, "headers": int(rng.integers(0, 3)), "list_items": 1, "bold": 0},
            )  # fmt: skip
        )
    Battle.objects.bulk_create(battles)
    for battle, vote in zip(battles, votes):
        vote.battle = battle
    # Vote times one second apart, in the INSERT itself (created_at is auto_now_add): an UPDATE after it
    # would count as a change of stored votes (arena_vote_changes, the refit cache's log).
    for k, vote in enumerate(votes):
        vote.created_at = start + timedelta(seconds=k)
    created_at = Vote._meta.get_field("created_at")
    created_at.auto_now_add = False
    try:
        Vote.objects.bulk_create(votes)
    finally:
        created_at.auto_now_add = True
    if with_turns:
        for battle, vote in zip(battles, votes):
            for index in range(vote.turn_count):
                turns.append(
                    Turn(
                        battle=battle,
                        index=index,
                        prompt=f"question {index}",
                        answer_a=f"answer a {index}",
                        answer_b=f"answer b {index}",
                        status_a=Turn.SideStatus.DONE,
                        status_b=Turn.SideStatus.DONE,
                    )  # fmt: skip
                )
        Turn.objects.bulk_create(turns)
    return votes


def votes_from_rows(rows: list[tuple[str, str, str, str, str]], *, start: datetime = T0, prompt: str = "") -> list[Vote]:
    """Counted votes from ``(model_a, model_b, winner, session_hash, ip_hash)`` rows, one second apart;
    ``prompt`` (when given) is every vote's prompt hash, else each vote gets its own."""
    models = catalogue(*sorted({r[0] for r in rows} | {r[1] for r in rows}))
    battles, votes = [], []
    for k, (a, b, winner, session, ip) in enumerate(rows):
        battles.append(Battle(public_id=uuid.uuid4(), model_a=models[a], model_b=models[b],
                              status=Battle.Status.VOTED, session_hash=session, ip_hash=ip))  # fmt: skip
        votes.append(
            Vote(model_a=models[a], model_b=models[b], winner=winner, model_a_position="left", turn_count=1,
                 battle_started_at=start, language="en", prompt_tokens=10, session_hash=session, ip_hash=ip,
                 prompt_hash=prompt or f"{start.timestamp():.0f}-{k}", style_a={}, style_b={})  # fmt: skip
        )
    Battle.objects.bulk_create(battles)
    for battle, vote in zip(battles, votes):
        vote.battle = battle
    Vote.objects.bulk_create(votes)
    for k, vote in enumerate(votes):
        vote.created_at = start + timedelta(seconds=k)
    Vote.objects.bulk_update(votes, ["created_at"], batch_size=1000)
    return votes
