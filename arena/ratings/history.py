"""Each model's rating across refits, kept past snapshot pruning (:class:`~arena.models.RatingPoint`).

A refit (:func:`arena.ratings.refit.snapshots_refit`) prunes all but the latest
:data:`~arena.ratings.refit.KEEP_PER_KEY` snapshots per method and category, so a history read from the
snapshots reached back only about 33 hours. In the same transaction as it saves its snapshots, the refit
copies every rated model's row of each into one compact point (:func:`history_record`): rating, interval,
conservative rank, battles, the snapshot's vote count and the scale's anchor. Points are never pruned with
the snapshots; they are thinned instead (:func:`history_thin`):

* every point of the last :data:`FULL_RESOLUTION` (7 days) is kept;
* an older point is kept only if it is the last of its UTC day for its model, method and category (the
  day's best-informed fit), so a model's chart keeps one point a day for as long as the arena runs.

Each refit thins only the points that aged past the week since the previous refit (an index on the time
bounds the work); the back-fill (:func:`history_backfill`, run by migration 0016 from the snapshots that
existed then) thins everything once. Both take the model classes as arguments so the migration can pass
its historical ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db.models import DateTimeField, Exists, ExpressionWrapper, OuterRef, Value
from django.db.models.functions import TruncDay
from django.utils import timezone

from arena.models import RatingPoint, RatingSnapshot

FULL_RESOLUTION = timedelta(days=7)  # every point younger than this is kept; older: the last of each UTC day
_MARGIN = timedelta(hours=1)  # clocks of the machines that write snapshots may disagree a little
_BATCH = 2000


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def points_from(
    *, snapshot_id: int, method: str, category: str, at: datetime, vote_count: int, anchor, rows
) -> list[dict]:
    """One point's fields per model with a finite rating in a snapshot's ``rows`` (its ``settings["anchor"]``
    as ``anchor``; anything malformed is left out, as the page always did)."""
    anchor = anchor if isinstance(anchor, dict) else {}
    anchor_model = anchor.get("model") if isinstance(anchor.get("model"), str) else ""
    anchor_rating = _number(anchor.get("rating"))
    common = {
        "method": method, "category": category, "at": at, "snapshot_id": snapshot_id, "vote_count": vote_count,
        "anchor_model": anchor_model[:200], "anchor_rating": anchor_rating,
        "anchor_applied": anchor.get("applied") is True and bool(anchor_model) and anchor_rating is not None,
    }  # fmt: skip
    points = []
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, dict):
            continue
        name, rating = row.get("model"), _number(row.get("rating"))
        if not isinstance(name, str) or not 0 < len(name) <= 200 or rating is None:
            continue
        points.append({
            **common, "model": name, "rating": rating, "ci_low": _number(row.get("ci_low")),
            "ci_high": _number(row.get("ci_high")), "rank": _count(row.get("rank_ub")),
            "battles": _count(row.get("battles")),
        })  # fmt: skip
    return points


def history_record(snapshots: Iterable[RatingSnapshot]) -> int:
    """Write the points of freshly saved ``snapshots`` (call inside the transaction that saved them).
    Returns the number written."""
    points = [
        RatingPoint(**fields)
        for s in snapshots
        for fields in points_from(
            snapshot_id=s.pk, method=s.method, category=s.category, at=s.created_at, vote_count=s.vote_count,
            anchor=(s.settings or {}).get("anchor"), rows=s.rows,
        )  # fmt: skip
    ]
    RatingPoint.objects.bulk_create(points, batch_size=_BATCH)
    return len(points)


def history_thin(*, now: datetime, since: datetime | None = None, points=RatingPoint) -> int:
    """Delete every point older than :data:`FULL_RESOLUTION` at ``now`` that has a later point of the same
    model, method and category on the same UTC day. ``since``: the previous thinning's ``now`` (only the
    points that aged since then are looked at); None: all. Returns the number deleted."""
    aged = points.objects.filter(at__lt=now - FULL_RESOLUTION)
    if since is not None:
        aged = aged.filter(at__gte=since - FULL_RESOLUTION - _MARGIN)
    day_end = ExpressionWrapper(TruncDay("at", tzinfo=UTC) + Value(timedelta(days=1)), output_field=DateTimeField())
    later = points.objects.filter(
        model=OuterRef("model"), method=OuterRef("method"), category=OuterRef("category"),
        at__gt=OuterRef("at"), at__lt=OuterRef("day_end"),
    )  # fmt: skip
    doomed = list(aged.annotate(day_end=day_end).filter(Exists(later)).values_list("id", flat=True))
    for start in range(0, len(doomed), _BATCH):
        points.objects.filter(id__in=doomed[start : start + _BATCH]).delete()
    return len(doomed)


def history_backfill(*, snapshots=RatingSnapshot, points=RatingPoint, now: datetime | None = None) -> int:
    """Points from every stored snapshot (what existed before the history did), then one full thinning.
    Points already there are kept as they are (the key is unique), so it may run again. Returns the number
    of points offered."""
    offered, pending = 0, []
    rows = (
        snapshots.objects.order_by("id")
        .values_list("id", "method", "category", "created_at", "vote_count", "settings__anchor", "rows")
        .iterator(chunk_size=20)  # a snapshot's rows reach hundreds of kB at 200 models
    )
    for pk, method, category, at, vote_count, anchor, snapshot_rows in rows:
        pending += points_from(
            snapshot_id=pk, method=method, category=category, at=at, vote_count=vote_count, anchor=anchor,
            rows=snapshot_rows,
        )  # fmt: skip
        if len(pending) >= _BATCH:
            points.objects.bulk_create([points(**p) for p in pending], ignore_conflicts=True)
            offered, pending = offered + len(pending), []
    points.objects.bulk_create([points(**p) for p in pending], ignore_conflicts=True)
    history_thin(now=now or timezone.now(), points=points)
    return offered + len(pending)
