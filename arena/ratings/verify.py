"""Check stored rating snapshots against a refit from the stored votes (after a restore, say).

``python manage.py ratings_verify`` refits every category and method with the parameters the latest
snapshots recorded (``settings["refit"]``: rounds, seed, ...) and compares each model's rating and
interval with what is stored. The fits are seeded, so the same votes give the same numbers.
"""

from __future__ import annotations

import math

from arena.models import RatingSnapshot
from arena.ratings.refit import snapshots_compute

FIELDS = ("rating", "ci_low", "ci_high")


def _latest_snapshots() -> dict[tuple[str, str], RatingSnapshot]:
    latest: dict[tuple[str, str], RatingSnapshot] = {}
    for snapshot in RatingSnapshot.objects.order_by("-created_at", "-id"):
        latest.setdefault((snapshot.method, snapshot.category), snapshot)
    return latest


def _finite(value):
    """Stored snapshots keep non-finite numbers as None (jsonb has no NaN): compare the same way."""
    return float(value) if value is not None and math.isfinite(value) else None


def _rows_differences(key, stored: list[dict], fresh: list[dict], tolerance: float) -> list[str]:
    name = f"{key[0]}/{key[1]}"
    by_model = {row["model"]: row for row in fresh}
    if set(by_model) != {row["model"] for row in stored}:
        return [f"{name}: models differ ({sorted(by_model)} refitted)"]
    problems = []
    for row in stored:
        for field in FIELDS:
            want, got = _finite(row.get(field)), _finite(by_model[row["model"]].get(field))
            if want is None and got is None:
                continue
            if want is None or got is None or not math.isclose(want, got, rel_tol=0, abs_tol=tolerance):
                problems.append(f"{name}: {row['model']} {field} stored {want}, refitted {got}")
    return problems


def snapshots_verify(*, tolerance: float = 1e-6) -> tuple[int, list[str]]:
    """``(snapshots checked, differences)``; no differences means the snapshots match the votes."""
    latest = _latest_snapshots()
    if not latest:
        return 0, []
    params = (latest.get(("bt", "overall")) or next(iter(latest.values()))).settings.get("refit")
    if not params:
        return 0, ["the latest snapshots do not record their refit parameters (written before they did)"]
    recorded = (latest.get(("bt", "overall")) or next(iter(latest.values()))).settings.get("anchor") or {}
    anchor = {"model": recorded["model"], "rating": recorded["rating"]} if recorded.get("model") else None
    _, drafts, _ = snapshots_compute(params, anchor=anchor)  # on the scale the snapshots were written on
    fresh = {(d.method, d.category): d for d in drafts}
    problems = []
    for key, snapshot in latest.items():
        draft = fresh.get(key)
        if draft is None:
            problems.append(f"{key[0]}/{key[1]}: stored, but the votes no longer give it")
            continue
        if draft.vote_count != snapshot.vote_count:
            problems.append(f"{key[0]}/{key[1]}: {snapshot.vote_count} votes stored, {draft.vote_count} now")
        problems += _rows_differences(key, snapshot.rows, draft.rows, tolerance)
    return len(latest), problems
