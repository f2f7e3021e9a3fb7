"""Reading ratings: the latest snapshots and live ratings, a model's rating across refits, retirements.

The newest snapshot per method and category and the live point ratings are what the pages and the API
read; the public record over time (retired models and those never shown, ``/leaderboard/arena/retired/``,
and a model's rating across refits, its page's chart) is read from the history that outlives snapshot
pruning (:mod:`arena.ratings.history`)."""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.db.models import Count, Max, Min, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from arena.models import Battle, LanguageModel, LiveRating, PairCountBase, RatingPoint, RatingSnapshot


def retirements_public() -> dict:
    """The public record (``/leaderboard/arena/retired/``): every retired model with its date and reason,
    and every model that battled but was never shown publicly (its name where not withheld), with the
    dates of its first and last battle and the count per organisation."""
    dates = _battle_dates()
    retired, hidden = [], []
    for model in LanguageModel.objects.filter(Q(retired_at__isnull=False) | Q(public=False)).order_by("name"):
        first, last, battles = dates.get(model.pk, (None, None, 0))
        if not model.public and battles == 0:
            continue  # never tested in the arena: nothing to record
        entry = {
            "model": "" if model.name_withheld else model.name, "withheld": model.name_withheld,
            "organisation": model.organisation or "(not stated)", "first_battle": first, "last_battle": last,
            "battles": battles, "retired_at": model.retired_at, "retired_reason": model.retired_reason,
        }  # fmt: skip
        (retired if model.public else hidden).append(entry)
    retired.sort(key=lambda e: (e["retired_at"], e["model"]), reverse=True)
    per_org = Counter(e["organisation"] for e in hidden)
    return {"retired": retired, "hidden": hidden, "hidden_by_organisation": sorted(per_org.items())}


def _battle_dates() -> dict[int, tuple]:
    """(first battle, last battle, battles) per model id, over both sides."""
    found: dict[int, list] = {}
    for side in ("model_a", "model_b"):
        for pk, first, last, n in (
            Battle.objects.values(side).annotate(first=Min("created_at"), last=Max("created_at"), n=Count("id"))
            .order_by().values_list(side, "first", "last", "n")
        ):  # fmt: skip
            have = found.setdefault(pk, [first, last, 0])
            have[0], have[1], have[2] = min(have[0], first), max(have[1], last), have[2] + n
    return {pk: tuple(v) for pk, v in found.items()}


def rating_history(name: str, *, method: str = "bt", category: str = "overall") -> list[dict]:
    """The model's point in each refit of ``method`` and ``category``, oldest first, with the refit's time,
    vote count and anchor, read from the history that outlives snapshot pruning
    (:mod:`arena.ratings.history`: every refit of the last week, then the last of each UTC day).
    ``snapshot`` is the id of the snapshot the point came from, which may since have been pruned. ``rank``
    is among the public models of that refit (the stored rank less the models not public whose closed
    interval lay wholly above; a provisional one among those, rarely closed, would make it one too good). A model
    the catalogue marks not public (or name-withheld) has no history here, and an anchor not public is
    not named (``{"model": None, "not_public": True, ...}``, :func:`anchor_public`)."""
    hidden = LanguageModel.objects.filter(name=name).filter(Q(public=False) | Q(name_withheld=True)).exists()
    if hidden:
        return []
    # The stored rank counted every fitted model; the page ranks among public ones, as the board does
    # (ranks_among): less the models not public whose interval, closed, lay wholly above at that refit.
    above = (
        RatingPoint.objects.filter(
            snapshot_id=OuterRef("snapshot_id"), method=method, category=category, ci_high__isnull=False,
            ci_low__gt=OuterRef("ci_high"), model__in=LanguageModel.objects.filter(public=False).values("name"),
        )
        .order_by().values("snapshot_id").annotate(n=Count("id")).values("n")
    )  # fmt: skip
    points = (
        RatingPoint.objects.filter(model=name, method=method, category=category)
        .annotate(hidden_above=Coalesce(Subquery(above), 0))
        .order_by("at", "snapshot_id")
    )
    never = set(LanguageModel.objects.filter(public=False).values_list("name", flat=True))
    return [
        {
            "snapshot": p.snapshot_id, "at": p.at, "votes": p.vote_count, "rating": p.rating, "ci_low": p.ci_low,
            "ci_high": p.ci_high, "rank": None if p.rank is None else max(1, p.rank - p.hidden_above),
            "battles": p.battles,
            "anchor": _point_anchor(p, never),
        }  # fmt: skip
        for p in points
    ]


def _point_anchor(point: RatingPoint, never: set[str]) -> dict:
    anchor = {"model": point.anchor_model or None, "rating": point.anchor_rating, "applied": point.anchor_applied}
    if anchor["model"] in never:
        anchor.update(model=None, not_public=True)
    return anchor


def snapshot_latest(method: str, category: str = "overall") -> RatingSnapshot | None:
    """The newest snapshot for a method and category, or None."""
    return (
        RatingSnapshot.objects.filter(method=method, category=category).order_by("-created_at", "-id").first()
    )


def live_rating_stamp(category: str = "overall") -> dict | None:
    """When the live ratings of a category were fitted, from how many votes (no rows), or None."""
    return (
        LiveRating.objects.filter(category=category)
        .values("id", "fitted_at", "vote_count", "high_water", "base_refit_at", "fit_seconds")
        .first()
    )


def live_rating(category: str = "overall") -> LiveRating | None:
    """The live point ratings of a category (:mod:`arena.ratings.live`), or None before the first live fit."""
    return LiveRating.objects.filter(category=category).first()


def snapshot_categories() -> list[str]:
    """Categories that have at least one snapshot: ``overall`` first, then by name."""
    found = set(RatingSnapshot.objects.values_list("category", flat=True).distinct())
    return sorted(found, key=lambda c: (c != "overall", c))


def snapshot_list(*, method: str | None = None, category: str | None = None):
    """Snapshots, newest first, optionally filtered (a queryset for the API to paginate)."""
    qs = RatingSnapshot.objects.order_by("-created_at", "-id")
    if method:
        qs = qs.filter(method=method)
    if category:
        qs = qs.filter(category=category)
    return qs


def snapshot_by_id(snapshot_id: int) -> RatingSnapshot | None:
    return RatingSnapshot.objects.filter(pk=snapshot_id).first()


def snapshot_latest_stamp(method: str, category: str = "overall") -> tuple | None:
    """``(id, created_at)`` of the newest snapshot for a method and category: names it for a per-process
    cache even where a test database hands out an id again."""
    return (
        RatingSnapshot.objects.filter(method=method, category=category)
        .order_by("-created_at", "-id")
        .values_list("id", "created_at")
        .first()
    )


def snapshot_latest_id_sql() -> str:
    """:func:`snapshot_latest_stamp`'s id as a SQL query with ``%(method)s`` and ``%(category)s`` parameters,
    for callers that fold it into one query of their own (the leaderboard's fingerprint)."""
    return (
        f"SELECT id FROM {RatingSnapshot._meta.db_table} WHERE method = %(method)s AND category = %(category)s"
        " ORDER BY created_at DESC, id DESC LIMIT 1"
    )


def category_votes(*, include: list[str] | tuple[str, ...] = ()) -> dict[str, dict]:
    """Every category the arena has counted votes in or rated, with what its board needs to say:
    ``votes`` (its counted votes now), ``snapshot`` (whether a Bradley-Terry snapshot of it exists),
    ``snapshot_votes`` (the votes its latest snapshot covers; None without one) and ``min_votes`` (the
    votes it needs for ratings: as that snapshot recorded, else as the last refit asked of a category,
    else ``ARENA_REFIT_MIN_VOTES`` for ``overall`` and ``ARENA_LIVE_MIN_CATEGORY_VOTES`` (50) for the others); ``overall`` first, then by name. Two small queries, no vote is read.

    ``votes`` is the newest of the live board's count (:class:`~arena.models.LiveRating`: the last
    refit's base plus every counted vote after it, refitted within a second of each vote), the last
    refit's base (:class:`~arena.models.PairCountBase`, which holds every category with a vote, tagged
    ones below the refit's minimum included) and the latest snapshot's count. A snapshot's count alone
    lags the votes until the next refit (the selector said "Overall (0 votes)" after four votes).
    ``include``: categories to list even with no vote and no snapshot yet (0 votes)."""
    bt = RatingSnapshot.objects.filter(method=RatingSnapshot.Method.BT)
    latest = bt.values("category").annotate(top=Max("id")).values("top")
    found: dict[str, dict] = {}
    refit = {"min_votes": int(getattr(settings, "ARENA_REFIT_MIN_VOTES", 10)),
             "min_category_votes": int(getattr(settings, "ARENA_LIVE_MIN_CATEGORY_VOTES", 50))}
    for category, vote_count, created_at, min_votes, params in RatingSnapshot.objects.filter(
        id__in=Subquery(latest)
    ).values_list("category", "vote_count", "created_at", "settings__min_votes", "settings__refit"):
        if category == "overall" and isinstance(params, dict):  # what the last refit asked of each category
            refit.update({k: v for k, v in params.items() if k in refit and isinstance(v, int)})
        found[category] = {
            "votes": vote_count, "at": created_at, "snapshot": True, "snapshot_votes": vote_count,
            "min_votes": min_votes if isinstance(min_votes, int) else None,
        }  # fmt: skip
    for category in include:
        found.setdefault(category, {"votes": 0, "at": None, "snapshot": False, "snapshot_votes": None, "min_votes": None})
    newer = PairCountBase.objects.values_list("category", "refit_at", "vote_count").union(
        LiveRating.objects.values_list("category", "fitted_at", "vote_count"), all=True
    )  # one query
    for category, at, vote_count in newer:
        entry = found.setdefault(
            category, {"votes": 0, "at": None, "snapshot": False, "snapshot_votes": None, "min_votes": None}
        )
        if entry["at"] is None or (at is not None and at >= entry["at"]):
            entry["votes"], entry["at"] = int(vote_count), at
    for category, entry in found.items():  # a category the last refit did not rate: the refit's minimum
        if entry["min_votes"] is None:
            entry["min_votes"] = refit["min_votes" if category == "overall" else "min_category_votes"]
    return {c: found[c] for c in sorted(found, key=lambda c: (c != "overall", c))}
