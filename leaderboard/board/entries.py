"""The board's entries: one per finished submission, one cell per benchmark, built once and kept.

An arena model evaluated through its endpoint is a submission of its own catalogue entry (source
``endpoint``): its row carries its scores beside its arena rating and judge score, marked "endpoint"
in the type and precision columns (its parameter count only where the catalogue knows it). Re-run,
the run that finished last is the row: an earlier one (``superseded_by`` set) is not on the board.

The whole set (every finished submission with its benchmark cells, arena rating and "best of K"
badge) is built from three queries and kept per process, keyed by a fingerprint of what it reads
(two aggregate queries and the latest arena snapshot id). Nothing is fitted or bootstrapped here.

Who sees what (:func:`entry_visible`): entries that are published (not private) and not waiting for
review (``none`` or ``approved``); hidden ones too when asked for (``show=hidden``), marked; and a
viewer's own entries whatever their state, marked.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict, defaultdict
from functools import lru_cache

from django.conf import settings
from django.db import connection

from arena.catalogue.selectors import BoardFilters, descriptions, rated_names, rows_public
from arena.ratings import selectors as rating_selectors
from common.sqltext import text_of
from evalcore.stats import best_of_k_inflation, estimates
from leaderboard.judging.columns import board_judge_cells, judge_fingerprint_sql
from leaderboard.models import ContaminationScan, EvaluationRun, ScanTaskResult, Score, Submission
from leaderboard.runs.benchmarks import (
    benchmark_key,
    board_metrics,
    headline_metric,
    task_baseline,
)

Z95 = 1.959963984540054
NORM_FLOOR = 0.0  # a normalised score below random guessing shows as 0 (the Open LLM Leaderboard's rule)
_KEPT: OrderedDict[tuple, dict] = OrderedDict()
_KEPT_SIZE = 8
_LOCK = threading.Lock()

PUBLIC_REVIEW = (Submission.Review.NONE, Submission.Review.APPROVED)
def _finite(x):
    return x if x is not None and math.isfinite(x) else None


def parameters_label(count: int | None) -> str:
    """135M, 1.7B, 12B: how model sizes are usually written ("–" not known: an endpoint's model)."""
    if count is None:
        return "–"
    if count >= 1e9:
        return f"{count / 1e9:.1f}B".replace(".0B", "B") if count < 1e11 else f"{count / 1e9:.0f}B"
    if count >= 1e6:
        return f"{count / 1e6:.0f}M"
    return f"{count / 1e3:.0f}K"


def _fingerprint_sql() -> str:
    """One query for everything the kept entries read: finished submissions (ids, privacy, review
    states), scores, finished contamination scans (they change the clean-subset scores the page shows),
    the latest overall Bradley-Terry snapshot and the judge column. One round trip, no ORM compilation:
    every page view runs it."""
    sub, score = Submission._meta.db_table, Score._meta.db_table
    result, scan = ScanTaskResult._meta.db_table, ContaminationScan._meta.db_table
    states = [
        f"coalesce(sum(id) FILTER (WHERE review_state = '{state}'), 0)" for state in Submission.Review.values
    ]
    submissions = text_of("count(id)", "coalesce(sum(id), 0)", "coalesce(sum(id) FILTER (WHERE private), 0)", *states,
                          "coalesce(sum(id) FILTER (WHERE superseded_by_id IS NOT NULL), 0)")  # fmt: skip
    scores = text_of("count(id)", "coalesce(sum(id), 0)", "max(updated_at)")
    scans = text_of("count(r.id)", "coalesce(sum(r.id), 0)", "coalesce(sum(r.flagged), 0)", "max(s.finished_at)")
    return (
        f"SELECT (SELECT {submissions} FROM {sub} WHERE status = %(finished)s),"
        f" (SELECT {scores} FROM {score}),"
        f" (SELECT {scans} FROM {result} r JOIN {scan} s ON s.id = r.scan_id WHERE s.status = %(scan_finished)s),"
        f" ({rating_selectors.snapshot_latest_id_sql()}),"
        f" {judge_fingerprint_sql()}"
    )


def _fingerprint() -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(
            _fingerprint_sql(),
            {
                "finished": Submission.Status.FINISHED, "scan_finished": ContaminationScan.Status.FINISHED,
                "method": "bt", "category": "overall",
            },
        )  # fmt: skip
        return tuple(cursor.fetchone())


def _part_estimate(p: dict) -> estimates.Estimate:
    """A leaf task's stored headline score as an Estimate (rows written before mid-p: Wilson's 0/1 proportions
    pool at their n; ``manage.py recompute_intervals`` gives them today's intervals)."""
    effective = p["effective_n"]
    if effective is None and p["interval"] == "wilson":
        effective = float(p["n"])
    return estimates.Estimate(p["value"], p["ci_low"], p["ci_high"], p["n"], p["interval"] or "t",
                              effective_n=effective, stderr=p["stderr"])  # fmt: skip


def _poolable(parts: list[estimates.Estimate]) -> bool:
    return all(p.effective_n and p.method.startswith(("mid-p", "pooled-mid-p", "wilson")) and 0 <= p.value <= 1
               for p in parts)  # fmt: skip


def _normalised(raw: estimates.Estimate, baseline: float) -> estimates.Estimate:
    scale = 100.0 / (1.0 - baseline)
    return estimates.mapped(raw, scale, -baseline * scale, bounds=(-baseline * scale, 100.0))


def _cell(parts: list[dict]) -> dict:
    """One benchmark of one submission from its leaf tasks' headline scores (micro average).

    Raw: one task's stored interval, or the tasks' pooled mid-p interval (MOVER where a task's number is
    not a proportion or bounded mean). Normalised: each task's score and interval mapped through its
    baseline and averaged the same way; the benchmark's normalised score and interval are then cut at 0
    (below random guessing shows as 0) and 100.
    """
    pieces = [_part_estimate(p) for p in parts]
    sizes = [p["n"] for p in parts]
    if len(parts) == 1:
        raw = pieces[0]
    elif _poolable(pieces):
        raw = estimates.pooled(pieces, sizes)
    else:
        raw = estimates.mover(pieces, sizes, bounds=(0.0, 1.0))
    baselines = {p["baseline"] for p in parts}
    if len(baselines) == 1:
        norm = _normalised(raw, baselines.pop())  # the same map for every task: map the benchmark's interval
    else:
        norm = estimates.mover([_normalised(e, p["baseline"]) for e, p in zip(pieces, parts)], sizes)
    norm = estimates.mapped(norm, 1.0, 0.0, bounds=(NORM_FLOOR, 100.0))
    total = sum(sizes)
    ordered = sorted(parts, key=lambda p: p["task"])
    if len(parts) == 1:
        protocol = parts[0]["config_sha256"]
    else:
        joined = "\n".join(f"{p['task']}:{p['config_sha256']}" for p in ordered)
        protocol = hashlib.sha256(joined.encode()).hexdigest()
    return {
        "value": raw.value, "se": raw.se, "ci_low": raw.ci_low, "ci_high": raw.ci_high, "n": total,
        "method": raw.method, "effective_n": raw.effective_n, "tasks": len(parts),
        "norm": norm.value, "norm_se": norm.se, "norm_low": norm.ci_low, "norm_high": norm.ci_high,
        "baseline": sum(p["baseline"] * p["n"] for p in parts) / total,
        "norm_floor": NORM_FLOOR,
        "run_id": ordered[0]["run_id"], "run_ids": [p["run_id"] for p in ordered], "protocol_sha256": protocol,
        "metric": parts[0]["metric"],
    }  # fmt: skip


def cells_average(cells: list[dict], *, normalised: bool) -> dict | None:
    """Mean over k benchmarks with the MOVER interval built from the benchmarks' own intervals.

    A benchmark at 0 of 4 ([0, 0.53]) adds its whole upper arm; a plug-in standard error of 0 would add
    nothing. ``se`` is the interval's (None where it is lopsided); ``n`` the documents of all k.
    """
    if not cells:
        return None
    key, low_key, high_key = ("norm", "norm_low", "norm_high") if normalised else ("value", "ci_low", "ci_high")
    parts = [estimates.Estimate(c[key], c[low_key], c[high_key], c["n"], "t") for c in cells]
    avg = estimates.mover(parts, bounds=(NORM_FLOOR, 100.0) if normalised else (0.0, 1.0))
    return {
        "value": avg.value, "se": avg.se, "ci_low": avg.ci_low, "ci_high": avg.ci_high, "n": avg.n,
        "method": avg.method, "benchmarks": len(cells),
    }  # fmt: skip


def _scores_by_submission(ids: set[int]) -> dict[int, dict[str, list[dict]]]:
    """{submission: {benchmark: [leaf parts]}} from the newest suite's finished run of each task."""
    rows = (
        Score.objects.filter(
            run__status=EvaluationRun.Status.FINISHED,
            run__submission__status=Submission.Status.FINISHED,
            metric__in=board_metrics(),
        )
        .exclude(run__submission__review_state=Submission.Review.REJECTED)
        .order_by()
        .values_list(
            "run__submission_id",
            "run_id",
            "run__task",
            "run__suite__version",
            "run__config_sha256",
            "metric",
            "value",
            "stderr",
            "ci_low",
            "ci_high",
            "n",
            "interval",
            "effective_n",
        )  # fmt: skip
    )
    # One plain fetch: a server-side cursor would be planned for its first rows (nested loops),
    # many times slower for a read that needs every row.
    by_run: dict[int, dict] = {}
    for sub_id, run_id, task, version, sha, metric, value, stderr, low, high, n, interval, effective in rows:
        if sub_id in ids:
            run = by_run.setdefault(run_id, {"sub": sub_id, "task": task, "version": version, "run_id": run_id,
                                             "sha": sha, "metrics": {}})  # fmt: skip
            run["metrics"][metric] = (value, stderr, low, high, n, interval, effective)
    runs: dict[tuple[int, str], dict] = {}
    for run in by_run.values():  # the newest suite's run of each task
        kept = runs.get((run["sub"], run["task"]))
        if kept is None or (run["version"], run["run_id"]) > (kept["version"], kept["run_id"]):
            runs[(run["sub"], run["task"])] = run
    found: dict[int, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for (sub_id, task), run in runs.items():
        metric = headline_metric(task, tuple(run["metrics"]))
        if metric not in run["metrics"]:
            continue
        value, stderr, low, high, n, interval, effective = run["metrics"][metric]
        if _finite(value) is None or not n:
            continue
        found[sub_id][benchmark_key(task)].append({
            "task": task, "run_id": run["run_id"], "config_sha256": run["sha"], "metric": metric,
            "value": value, "stderr": _finite(stderr), "ci_low": _finite(low), "ci_high": _finite(high), "n": n,
            "interval": interval, "effective_n": _finite(effective), "baseline": task_baseline(task),
        })  # fmt: skip
    return found


@lru_cache(maxsize=64)
def _max_z(k: int) -> float:
    """E[max of k standard normals]: the inflation of the best of k is ``se`` times this."""
    return best_of_k_inflation(k, se=1.0).max_z


def _badges(entries: list[dict]) -> None:
    """The "best of K variants" where an owner's family (owner, base model) has more than N private variants."""
    limit = settings.LEADERBOARD_PRIVATE_VARIANTS_LIMIT  # as leaderboard.submissions.services.variant_review_reason
    families: dict[tuple, list[dict]] = defaultdict(list)
    for entry in entries:
        if entry["base_model"].strip():
            families[(entry["owner_id"], entry["base_model"].strip().lower())].append(entry)
    for members in families.values():
        private = sum(1 for m in members if m["private"])
        if private <= limit:
            continue
        k = len(members)
        for entry in members:
            avg = entry["average"]
            # The best of k moves by about its spread: half the interval's width / 1.96 (lopsided ones too).
            se = (avg["ci_high"] - avg["ci_low"]) / (2 * Z95) if avg and avg["ci_low"] is not None else None
            entry["badge"] = {
                "k": k, "private": private,
                "inflation": None if se is None else 100 * se * _max_z(k),
            }  # fmt: skip


def _build() -> dict:
    arena_rows = {}
    snapshot = rating_selectors.snapshot_latest("bt", "overall")
    if snapshot is not None:
        # Only models shown publicly in the arena lend their rating to a board row (the arena's rule).
        shown = rows_public(snapshot.rows, descriptions(names=rated_names(snapshot.rows)), BoardFilters(retired=True))
        arena_rows = {r["model"]: r for r in shown}
    subs = list(
        Submission.objects.filter(status=Submission.Status.FINISHED, superseded_by__isnull=True)  # re-run since
        .order_by("-created_at", "-id")
        .values(
            "id",
            "public_id",
            "model_name",
            "owner_id",
            "model_type",
            "base_model",
            "parameter_count",
            "precision",
            "private",
            "review_state",
            "created_at",
            "finished_at",
            "language_model__name",
            "language_model_id",
            "source",
        )  # fmt: skip
    )
    judge_info, judged = board_judge_cells()
    scores = _scores_by_submission({s["id"] for s in subs})
    type_labels = {**dict(Submission.ModelType.choices), Submission.ModelType.CHAT: "Chat"}
    entries = []
    for sub in subs:
        cells = {key: _cell(parts) for key, parts in scores.get(sub["id"], {}).items()}
        arena = arena_rows.get(sub["language_model__name"])
        endpoint = sub["source"] == Submission.Source.ENDPOINT  # an arena model scored through its endpoint
        type_label = type_labels.get(sub["model_type"], sub["model_type"])
        entries.append({
            "id": sub["id"], "public_id": sub["public_id"], "model": sub["model_name"], "owner_id": sub["owner_id"],
            "type": sub["model_type"], "type_label": f"{type_label} · endpoint" if endpoint else type_label,
            "base_model": sub["base_model"], "parameters": sub["parameter_count"], "endpoint": endpoint,
            "parameters_label": parameters_label(sub["parameter_count"]),
            "precision": "endpoint" if endpoint and not sub["precision"] else sub["precision"],
            "private": sub["private"], "review_state": sub["review_state"], "created_at": sub["created_at"],
            "hidden": sub["review_state"] == Submission.Review.HIDDEN,
            "arena": None if arena is None else {
                "rating": arena["rating"], "ci_low": arena["ci_low"], "ci_high": arena["ci_high"],
                "battles": arena.get("battles"), "provisional": bool(arena.get("provisional")),
            },
            "judge": judged.get(sub["language_model_id"]), "language_model_id": sub["language_model_id"],
            "cells": cells, "badge": None,
            "average": cells_average(list(cells.values()), normalised=False),
        })  # fmt: skip
    _badges(entries)
    return {"entries": entries, "arena_snapshot_id": snapshot.id if snapshot else None, "judge": judge_info}


def board_entries() -> dict:
    """Every finished entry (rejected ones too: they count as variants, never shown), kept per fingerprint."""
    key = _fingerprint()
    with _LOCK:
        if key in _KEPT:
            _KEPT.move_to_end(key)
            return _KEPT[key]
    built = _build()
    built = {**built, "fingerprint": key, "owners": frozenset(e["owner_id"] for e in built["entries"])}
    with _LOCK:
        _KEPT[key] = built
        while len(_KEPT) > _KEPT_SIZE:
            _KEPT.popitem(last=False)
    return built


def entry_visible(entry: dict, viewer, *, show_hidden: bool) -> bool:
    if entry["review_state"] == Submission.Review.REJECTED:
        return False
    if viewer is not None and viewer.is_authenticated and entry["owner_id"] == viewer.pk:
        return True
    if entry["private"]:
        return False
    if entry["review_state"] in PUBLIC_REVIEW:
        return True
    return show_hidden and entry["hidden"]
