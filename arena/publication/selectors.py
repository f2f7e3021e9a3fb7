"""Which battles the public may see: voted battles, and the published ones (covered by a snapshot, after
the delay, moderated and not held back)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import DateTimeField, ExpressionWrapper, F, Max, Prefetch, Q
from django.db.models.functions import Least

from arena.models import Battle, DataRelease, RatingSnapshot, Turn


def battles_voted(
    *,
    model: str | None = None,
    winner: str | None = None,
    language: str | None = None,
    counted: bool | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
):
    """Battles that have a vote (names may be shown), newest vote first, with their turns prefetched."""
    qs = (
        Battle.objects.filter(vote__isnull=False)
        .select_related("model_a", "model_b", "vote")
        .prefetch_related(Prefetch("turns", queryset=Turn.objects.order_by("index")))
        .order_by("-vote__created_at", "-id")
    )
    if model:  # a withheld name finds nothing (the public knows the model by its stand-in only)
        qs = qs.filter(Q(model_a__name=model, model_a__name_withheld=False) | Q(model_b__name=model, model_b__name_withheld=False))
    if winner:
        qs = qs.filter(vote__winner=winner)
    if language is not None:
        qs = qs.filter(vote__language=language)
    if counted is not None:
        qs = qs.filter(vote__counted=counted)
    if since:
        qs = qs.filter(vote__created_at__gte=since)
    if until:
        qs = qs.filter(vote__created_at__lt=until)
    return qs


def battle_voted(public_id) -> object | None:
    """One battle by its public id, only once it has a vote (before that it does not exist here)."""
    return battles_voted().filter(public_id=public_id).first()


def battles_published_until(delay_s: int) -> datetime | None:
    """Votes cast at or before this time may be published with their battle (prompt, answers, names).

    The rule: a battle is published once a rating snapshot covers its vote (the vote is no later than the
    snapshot's ``last_vote_at``) and that snapshot was created at least ``delay_s`` seconds after the vote.
    Over the overall Bradley-Terry snapshots (one per refit) that is the latest
    ``min(last_vote_at, created_at - delay)``; None while no snapshot publishes anything.
    """
    shifted = ExpressionWrapper(F("created_at") - timedelta(seconds=delay_s), output_field=DateTimeField())
    return RatingSnapshot.objects.filter(
        method=RatingSnapshot.Method.BT, category="overall", last_vote_at__isnull=False
    ).aggregate(until=Max(Least("last_vote_at", shifted)))["until"]


def battles_published(*, delay_s: int, **filters):
    """:func:`battles_voted` restricted to the published ones (see :func:`battles_published_until`): moderated,
    and not held back (a moderation tag or a report waiting for staff, or kept held)."""
    until = battles_published_until(delay_s)
    if until is None:
        return Battle.objects.none()
    # Moderated (the refit moderates first), and not held back for review (BattleHold).
    return (
        battles_voted(**filters)
        .filter(vote__created_at__lte=until, moderation__isnull=False)
        .exclude(hold__status__in=["held", "kept"])
    )


def battle_published(public_id, *, delay_s: int) -> object | None:
    """One published battle by its public id; None before it is published (or if it does not exist)."""
    return battles_published(delay_s=delay_s).filter(public_id=public_id).first()


def release_snapshot_latest() -> RatingSnapshot | None:
    """The snapshot a data release would be cut at now: the newest overall Bradley-Terry snapshot that
    covers a counted vote (:mod:`arena.publication.releases`), or None."""
    return (
        RatingSnapshot.objects.filter(method=RatingSnapshot.Method.BT, category="overall", last_vote_at__isnull=False)
        .order_by("-created_at", "-id")
        .first()
    )


def release_outlook() -> dict:
    """What the releases page says about the next release: ``snapshot`` (the one a release would be cut at
    now, or None before the first refit with a counted vote), ``released`` (a release of it exists),
    ``publish_delay_hours`` (how old a battle's vote must be for it to be in one: ``ARENA_PUBLISH_DELAY_S``)."""
    snapshot = release_snapshot_latest()
    released = snapshot is not None and DataRelease.objects.filter(snapshot=snapshot).exists()
    return {
        "snapshot": snapshot,
        "released": released,
        "publish_delay_hours": round(int(settings.ARENA_PUBLISH_DELAY_S) / 3600, 1),
    }
