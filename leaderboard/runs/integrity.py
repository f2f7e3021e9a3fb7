"""Reads of a submission's contamination checks: probe rates, scan results, clean-subset scores.

A clean-subset score is the headline metric over the evaluated items no finished scan flagged,
beside the full score, with their paired difference ``clean - full`` (items resampled together:
:func:`evalcore.stats.subset_difference`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from evalcore.engine.metrics import mean_value
from evalcore.stats import subset_difference
from leaderboard.models import (
    ContaminationScan,
    EvaluationRun,
    MemorisationProbe,
    SampleRecord,
    ScanTaskResult,
    Score,
    Submission,
)
from leaderboard.runs.benchmarks import headline_metric

CLEAN_ROUNDS = 2000
CLEAN_SEED = 20241401


def _probe_row(probe: MemorisationProbe) -> dict:
    s = probe.summary
    return {"task": probe.task, "limit": probe.limit, "test": s.get("test", {}), "train": s.get("train", {}),
            "difference": probe.difference, "diff_ci_low": probe.diff_ci_low, "diff_ci_high": probe.diff_ci_high,
            "level": s.get("level"), "words": s.get("words"), "hits": probe.hits}  # fmt: skip


def _scan_row(scan: ContaminationScan, *, staff: bool) -> dict:
    corpus = scan.report.get("corpus", {}) if scan.report else {}
    return {
        "id": scan.pk, "kind": scan.get_kind_display(), "status": scan.status, "n": scan.n,
        "corpus": scan.corpus if staff else "", "created_at": scan.created_at, "finished_at": scan.finished_at,
        "failure_reason": scan.failure_reason if staff else "",
        "files": corpus.get("files"), "bytes": corpus.get("bytes"), "lines": corpus.get("lines"),
        "lines_skipped": corpus.get("lines_skipped"), "skipped": corpus.get("skipped") or {},
        "failed_files": [Path(str(f.get("path", ""))).name for f in corpus.get("failed_files") or []],
        "ignored_files": corpus.get("ignored_files"),
        "tasks": [
            {"task": r.task, "items": r.items, "flagged": r.flagged, "share": r.share,
             "doc_ids": r.flagged_doc_ids[:50], "more": max(0, len(r.flagged_doc_ids) - 50)}
            for r in scan.task_results.all()
        ],
    }  # fmt: skip


def flagged_docs(submission: Submission) -> dict[str, set[int]]:
    """Task -> ``doc_id``s any finished scan of the submission flagged."""
    flagged: dict[str, set[int]] = defaultdict(set)
    rows = ScanTaskResult.objects.filter(scan__submission=submission, scan__status=ContaminationScan.Status.FINISHED)
    for task, doc_ids in rows.values_list("task", "flagged_doc_ids"):
        flagged[task].update(int(d) for d in doc_ids or [])
    return dict(flagged)


def _doc_values(run: EvaluationRun, metric: str) -> tuple[np.ndarray, np.ndarray]:
    rows = (
        SampleRecord.objects.filter(run=run)
        .annotate(_v=KeyTextTransform(metric, KeyTransform("metrics", "payload")))
        .order_by("doc_id")
        .values_list("doc_id", "_v")
    )
    ids, values = [], []
    for doc_id, raw in rows.iterator(chunk_size=5000):
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            ids.append(doc_id)
            values.append(value)
    return np.array(ids, dtype=np.int64), np.array(values, dtype=np.float64)


def clean_subset_of_runs(runs: list[EvaluationRun], flagged: dict[str, set[int]]) -> dict | None:
    """The headline score of ``runs`` (one benchmark's leaf tasks, items pooled) on the items not in
    ``flagged`` (task -> doc_ids), beside the score on all items, with the paired difference
    ``clean - full``; None when no evaluated item is flagged or no run has a per-item metric."""
    values, keeps, metric = [], [], None
    for run in runs:
        name = headline_metric(run.task, tuple(Score.objects.filter(run=run).values_list("metric", flat=True)))
        if name is None:
            continue
        ids, run_values = _doc_values(run, name)
        values.append(run_values)
        keeps.append(~np.isin(ids, np.array(sorted(flagged.get(run.task, ())), dtype=np.int64)))
        metric = metric or name
    if not values or sum(v.size for v in values) == 0:
        return None
    x, keep = np.concatenate(values), np.concatenate(keeps)
    if keep.all():
        return None
    base = metric.split(",")[0]
    full = mean_value(x, metric=base)  # the interval the score itself gets (mid-p for a proportion)
    row = {"metric": metric, "n": int(x.size), "flagged": int((~keep).sum()), "clean_n": int(keep.sum()),
           "full": full.value, "full_ci_low": full.ci_low, "full_ci_high": full.ci_high, "interval": full.interval,
           "clean": None}  # fmt: skip
    if keep.any():
        clean = mean_value(x[keep], metric=base)
        diff = subset_difference(x, keep, rng=np.random.default_rng(CLEAN_SEED), rounds=CLEAN_ROUNDS)
        row.update(clean=clean.value, clean_ci_low=clean.ci_low, clean_ci_high=clean.ci_high,
                   difference=diff.difference, diff_ci_low=diff.ci_low, diff_ci_high=diff.ci_high,
                   distinguishable=not diff.ci_low <= 0.0 <= diff.ci_high)  # fmt: skip
    return row


def clean_subset(run: EvaluationRun, flagged: set[int]) -> dict | None:
    """:func:`clean_subset_of_runs` for one run, with its task and id."""
    row = clean_subset_of_runs([run], {run.task: flagged}) if flagged else None
    return None if row is None else {"task": run.task, "run_id": run.pk, **row}


def board_clean_cells(rows: list[dict]) -> None:
    """Add ``clean`` (a clean-subset score) to each board cell whose items a scan flagged.

    ``rows`` are :func:`leaderboard.board.selectors.board_table` rows; only entries with a finished
    scan that flagged something are read, so a board without contamination findings costs one query.
    """
    ids = {row["id"] for row in rows}
    found = ScanTaskResult.objects.filter(
        scan__submission_id__in=ids, scan__status=ContaminationScan.Status.FINISHED, flagged__gt=0
    ).values_list("scan__submission_id", "task", "flagged_doc_ids")
    flagged: dict[int, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for submission_id, task, doc_ids in found:
        flagged[submission_id][task].update(int(d) for d in doc_ids or [])
    for row in rows:
        tasks = flagged.get(row["id"])
        for _key, cell in row["row_cells"] if tasks else ():
            runs = list(EvaluationRun.objects.filter(pk__in=cell["run_ids"]).order_by("task")) if cell else []
            if any(run.task in tasks for run in runs):
                cell["clean"] = clean_subset_of_runs(runs, tasks)


def submission_integrity(submission: Submission, *, staff: bool = False, task: str | None = None) -> dict:
    """Probe results, scans and clean-subset scores of a submission (only ``task``'s when given)."""
    probes = MemorisationProbe.objects.filter(submission=submission).order_by("task")
    scans = ContaminationScan.objects.filter(submission=submission).prefetch_related("task_results")
    runs = EvaluationRun.objects.filter(submission=submission, status=EvaluationRun.Status.FINISHED)
    if task is not None:
        probes, runs = probes.filter(task=task), runs.filter(task=task)
    scan_rows = [_scan_row(s, staff=staff) for s in scans.order_by("-created_at", "-id")]
    if task is not None:
        for row in scan_rows:
            row["tasks"] = [t for t in row["tasks"] if t["task"] == task]
    flagged = flagged_docs(submission)
    clean = [c for run in runs.order_by("task") if (c := clean_subset(run, flagged.get(run.task, set())))]
    return {"probes": [_probe_row(p) for p in probes], "scans": scan_rows, "clean": clean,
            "training_files": list(submission.training_files.order_by("name").values("name", "size", "sha256"))}  # fmt: skip
