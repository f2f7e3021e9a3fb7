"""The vote: read the battle, check it may be voted on, build the vote, claim the battle and insert.

The vote path is the arena's hottest: on PostgreSQL it is two round trips (a read, then one statement
that claims the battle and inserts the vote); elsewhere the same steps run under the battle's lock.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from arena.categories.language import detect_language
from arena.models import Battle, LanguageModel, Turn, Vote
from arena.play.base import ArenaError
from arena.play.reveals import model_terms, reveals_identity
from arena.publication.consent import consent_fields
from arena.ratings.requests import refit_request
from arena.votes.filters import DAILY_CAP
from evalcore.ratings import count_tokens, markdown_style_counts, prompt_key
from workers import metrics


def side_style(answers: list[str]) -> dict[str, int]:
    """Style features of one side over all its answers (summed), the keys style control reads."""
    total: dict[str, int] = {}
    for answer in answers:
        for name, value in markdown_style_counts(answer).items():
            total[name] = total.get(name, 0) + value
    return total


WINNERS = {choice.value for choice in Vote.Winner}


@dataclass(frozen=True)
class VoteContext:
    """What a vote needs from its battle, read in one statement under the battle's row lock."""

    battle_id: int
    status: str
    session_hash: str
    created_at: datetime
    model_ids: tuple[int, int]
    names: tuple[str, str]
    families: tuple[str, str]
    prompts: list[str]
    answers: dict[str, list[str]]
    all_done: bool
    terms: tuple[str, ...] = ()  # names, families, aliases and makers of both models (arena.play.reveals)


def _aliases(value) -> list:
    """A JSON list column as the driver hands it back (parsed, or text on SQLite)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return value if isinstance(value, list) else []


@lru_cache(maxsize=4)
def _vote_context_sql(vendor: str, lock: bool) -> str:
    battle, model, turn = Battle._meta, LanguageModel._meta, Turn._meta
    quote = connection.ops.quote_name

    def col(meta, name: str) -> str:
        return quote(meta.get_field(name).column)

    return (
        f"SELECT b.{col(battle, 'id')}, b.{col(battle, 'status')}, b.{col(battle, 'session_hash')}, "
        f"b.{col(battle, 'created_at')}, b.{col(battle, 'model_a')}, b.{col(battle, 'model_b')}, "
        f"ma.{col(model, 'name')}, ma.{col(model, 'family')}, mb.{col(model, 'name')}, mb.{col(model, 'family')}, "
        f"t.{col(turn, 'prompt')}, t.{col(turn, 'answer_a')}, t.{col(turn, 'answer_b')}, "
        f"t.{col(turn, 'status_a')}, t.{col(turn, 'status_b')}, "
        f"ma.{col(model, 'aliases')}, ma.{col(model, 'maker')}, "
        f"mb.{col(model, 'aliases')}, mb.{col(model, 'maker')} "
        f"FROM {quote(battle.db_table)} b "
        f"JOIN {quote(model.db_table)} ma ON ma.{col(model, 'id')} = b.{col(battle, 'model_a')} "
        f"JOIN {quote(model.db_table)} mb ON mb.{col(model, 'id')} = b.{col(battle, 'model_b')} "
        f"LEFT JOIN {quote(turn.db_table)} t ON t.{col(turn, 'battle')} = b.{col(battle, 'id')} "
        f"WHERE b.{col(battle, 'public_id')} = %s ORDER BY t.{col(turn, 'index')}"
        + (" FOR UPDATE OF b" if lock else "")
    )


def _vote_context(public_id, *, session_hash: str, lock: bool) -> VoteContext:
    """The voter's battle with its models and turns, in one hand-written statement (three ORM queries
    before: the vote path is the arena's hottest); with ``lock``, row-locked until the transaction ends.
    Another voter's battle is reported as missing, as everywhere else.
    """
    try:
        key = Battle._meta.get_field("public_id").get_db_prep_value(
            public_id if isinstance(public_id, uuid.UUID) else uuid.UUID(str(public_id)), connection
        )
    except (ValueError, TypeError, AttributeError):
        raise ArenaError("No such battle.", status=404) from None
    lock = lock and connection.features.has_select_for_update_of
    with connection.cursor() as cursor:
        cursor.execute(_vote_context_sql(connection.vendor, lock), [key])
        rows = cursor.fetchall()
    if not rows or rows[0][2] != session_hash:
        raise ArenaError("No such battle.", status=404)
    first = rows[0]
    created_at = first[3]
    if isinstance(created_at, str):  # SQLite hands back text
        created_at = parse_datetime(created_at)
    if created_at is not None and timezone.is_naive(created_at):
        created_at = timezone.make_aware(created_at, UTC)
    turns = [row for row in rows if row[10] is not None]
    done = Turn.SideStatus.DONE
    return VoteContext(
        battle_id=first[0],
        status=first[1],
        session_hash=first[2],
        created_at=created_at,
        model_ids=(first[4], first[5]),
        names=(first[6], first[8]),
        families=(first[7], first[9]),
        prompts=[row[10] for row in turns],
        answers={"a": [row[11] for row in turns], "b": [row[12] for row in turns]},
        all_done=bool(turns) and all(row[13] == done and row[14] == done for row in turns),
        terms=(
            *model_terms(first[6], first[7], _aliases(first[15]), first[16]),
            *model_terms(first[8], first[9], _aliases(first[17]), first[18]),
        ),
    )


@dataclass(frozen=True)
class CastVote:
    """The recorded vote, as the voter's response shows it."""

    id: int
    winner: str
    model_a_name: str
    model_b_name: str
    counted: bool
    excluded_reason: str


def _vote_refusal(battle: VoteContext) -> ArenaError | None:
    if battle.status == Battle.Status.VOTED:
        return ArenaError("This battle already has a vote: start a new round.", status=409)
    if battle.status == Battle.Status.FAILED:
        return ArenaError("A model failed to answer in this battle, so it cannot be voted on.", status=409)
    if not battle.all_done:
        return ArenaError("Vote once both models have finished answering.", status=409)
    return None


def _vote_build(battle: VoteContext, *, winner: str, session_hash: str, ip_hash: str, consent: dict | None = None) -> Vote:
    answers = battle.answers["a"] + battle.answers["b"]
    excluded = "identity_revealed" if reveals_identity(battle.terms, answers) else ""
    if not excluded and _past_daily_cap(session_hash):
        excluded = DAILY_CAP
    prompts = "\n".join(battle.prompts)
    vote = Vote(
        battle_id=battle.battle_id,
        model_a_id=battle.model_ids[0],
        model_b_id=battle.model_ids[1],
        winner=winner,
        model_a_position="left",
        turn_count=len(battle.prompts),
        battle_started_at=battle.created_at,
        style_a=side_style(battle.answers["a"]),
        style_b=side_style(battle.answers["b"]),
        prompt_tokens=count_tokens(prompts),
        language=detect_language(prompts),
        prompt_hash=prompt_key(battle.prompts),
        session_hash=session_hash,
        ip_hash=ip_hash,
        counted=not excluded,
        excluded_reason=excluded,
        **consent_fields(consent),
    )
    # Field checks only: the battle and both models come from the battle row, and the database
    # enforces the constraints (validating them here would cost a query each).
    vote.full_clean(exclude=["battle", "model_a", "model_b"], validate_constraints=False)
    return vote


def _past_daily_cap(session_hash: str) -> bool:
    """Whether this voter (session) already cast ``ARENA_DAILY_VOTE_CAP`` votes today (UTC): a vote past
    the cap is kept but not counted (``excluded_reason="daily_cap"``; 0 turns the cap off). Two votes
    racing at the cap may both count: the cap evens out heavy voters, it is not a security limit."""
    cap = int(getattr(settings, "ARENA_DAILY_VOTE_CAP", 0) or 0)
    if cap <= 0:
        return False
    midnight = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    # Through the battle's indexed session hash (the vote's own copy has no index).
    return Vote.objects.filter(battle__session_hash=session_hash, created_at__gte=midnight).count() >= cap


@lru_cache(maxsize=2)
def _claim_and_insert_sql(vendor: str) -> tuple[str, tuple]:
    """PostgreSQL: mark the battle voted and insert the vote in one statement, only while the battle is
    still active with the turns the vote was computed from; (sql, insert fields)."""
    battle, turn, vote = Battle._meta, Turn._meta, Vote._meta
    quote = connection.ops.quote_name
    # Generated columns (the numeric style counts) are the database's to fill.
    fields = tuple(f for f in vote.concrete_fields if not f.primary_key and not f.generated)
    columns = ", ".join(quote(f.column) for f in fields)
    values = ", ".join(["%s"] * len(fields))
    bid, status = quote(battle.get_field("id").column), quote(battle.get_field("status").column)
    sql = (
        f"WITH claimed AS (UPDATE {quote(battle.db_table)} SET {status} = %s, "
        f"{quote(battle.get_field('excluded_reason').column)} = %s "
        f"WHERE {bid} = %s AND {status} = %s AND (SELECT count(*) FROM {quote(turn.db_table)} "
        f"WHERE {quote(turn.get_field('battle').column)} = %s) = %s RETURNING {bid}) "
        f"INSERT INTO {quote(vote.db_table)} ({columns}) SELECT {values} FROM claimed "
        f"RETURNING {quote(vote.pk.column)}"
    )
    return sql, fields


def _vote_save_claiming(battle: VoteContext, vote: Vote) -> bool:
    """One autocommitted statement: False when the battle changed since it was read (voted, failed,
    or given another turn by a concurrent request), and then nothing is written."""
    sql, fields = _claim_and_insert_sql(connection.vendor)
    params = [Battle.Status.VOTED, vote.excluded_reason, battle.battle_id, Battle.Status.ACTIVE]
    params += [battle.battle_id, len(battle.prompts)]
    params += [f.get_db_prep_save(f.pre_save(vote, add=True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    vote.pk = row[0]
    return True


def vote_cast(*, public_id, winner: object, session_hash: str, ip_hash: str, consent: dict | None = None) -> CastVote:
    """Record the vote (one per battle, enforced by the database) and schedule a ratings refit.

    On PostgreSQL: an unlocked read, then one statement that claims the battle (active, with the same
    turns) and inserts the vote, so no transaction is held across the computation. Elsewhere (SQLite):
    the same steps inside one transaction under the battle's lock.
    """
    if winner not in WINNERS:
        raise ArenaError(f"Unknown vote {str(winner)[:40]!r}: choose one of {sorted(WINNERS)}.")
    try:
        if connection.vendor == "postgresql" and connection.get_autocommit():
            battle = _vote_context(public_id, session_hash=session_hash, lock=False)
            if refusal := _vote_refusal(battle):
                raise refusal
            vote = _vote_build(battle, winner=winner, session_hash=session_hash, ip_hash=ip_hash, consent=consent)
            if not _vote_save_claiming(battle, vote):
                # Changed meanwhile: read it again for the accurate refusal.
                raise _vote_refusal(_vote_context(public_id, session_hash=session_hash, lock=False)) or ArenaError(
                    "This battle changed while the vote was recorded: try again.", status=409
                )
            refit_request()
        else:
            with transaction.atomic():
                battle = _vote_context(public_id, session_hash=session_hash, lock=True)
                if refusal := _vote_refusal(battle):
                    raise refusal
                vote = _vote_build(battle, winner=winner, session_hash=session_hash, ip_hash=ip_hash, consent=consent)
                vote.save(force_insert=True)
                Battle.objects.filter(pk=battle.battle_id).update(
                    status=Battle.Status.VOTED, excluded_reason=vote.excluded_reason
                )
                transaction.on_commit(refit_request)
    except IntegrityError:
        # Two votes raced past the checks: the unique constraint kept exactly one.
        raise ArenaError("This battle already has a vote: start a new round.", status=409) from None
    metrics.vote_counted(vote.counted)
    return CastVote(vote.pk, vote.winner, battle.names[0], battle.names[1], vote.counted, vote.excluded_reason)
