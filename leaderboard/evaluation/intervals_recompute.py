"""New intervals for stored runs, from their per-sample records: no model, no re-scoring.

:func:`runs_recompute_intervals` reads each finished run's :class:`SampleRecord` payloads (their
per-document metrics, written when the run was scored), aggregates them again with
``evalcore.engine.aggregate`` under the config the run was scored with, and stores the numbers the
current interval code gives (:mod:`evalcore.stats.estimates`). The values themselves must come out the
same: a run whose value would change is left alone and reported (its scoring changed: re-score it,
:mod:`leaderboard.evaluation.rescoring`). Every changed score keeps its old numbers in
:class:`ScoreHistory`. Running it twice changes nothing the second time.

``manage.py recompute_intervals`` runs it (``--task``, ``--dry-run``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from django.db import transaction

from evalcore.engine import TaskConfig, aggregate, task_config_from_mapping
from evalcore.engine.results import code_version as engine_code_version
from leaderboard.evaluation.rescoring import record_from_payload
from leaderboard.evaluation.score_store import json_safe, score_changed, scores_replace
from leaderboard.evaluation.suites import SEED
from leaderboard.evaluation.task_index import task_index
from leaderboard.models import EvaluationRun, SampleRecord

log = logging.getLogger(__name__)
REASON = "intervals recomputed from stored samples (evalcore.stats.estimates)"


@dataclass
class RecomputeSummary:
    runs: int = 0
    runs_changed: int = 0
    scores_changed: int = 0
    skipped: list[tuple[int, str, str]] = field(default_factory=list)  # (run id, task, why)


def _config(run: EvaluationRun) -> TaskConfig:
    """The config the run was scored with: the task as loaded now if its hash matches, else the stored one."""
    current = task_index().tasks.get(run.task)
    if isinstance(current, TaskConfig) and current.sha256 == run.config_sha256:
        return current
    stored = (run.protocol or {}).get("config")
    if not isinstance(stored, dict):
        raise ValueError("the run's protocol keeps no config and the task's current config has another hash")
    config = task_config_from_mapping(dict(stored), source=f"run {run.pk}'s stored config")
    if config.task != run.task:
        raise ValueError(f"the stored config is for {config.task!r}")
    return config


def _same_value(old, new) -> bool:
    if old is None or new is None:
        return old is None and (new is None or not math.isfinite(new))
    return math.isclose(old, new, rel_tol=1e-9, abs_tol=1e-12)


def _recompute_one(run_id: int, *, dry_run: bool, code_version: dict, summary: RecomputeSummary) -> None:
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        payloads = list(SampleRecord.objects.filter(run=run).order_by("doc_id").values_list("payload", flat=True))
        if not payloads:
            summary.skipped.append((run.pk, run.task, "no stored samples"))
            return
        records = [record_from_payload(p) for p in payloads]
        if any(not isinstance(r.get("metrics"), dict) for r in records):
            summary.skipped.append((run.pk, run.task, "samples without per-document metrics (re-score it)"))
            return
        try:
            config = _config(run)
            metrics = aggregate(config, records, seed=SEED)
        except (ValueError, KeyError, TypeError) as exc:
            summary.skipped.append((run.pk, run.task, f"cannot aggregate its samples: {exc}"))
            return
        old = {s.metric: s for s in run.scores.all()}
        moved = [name for name, value in metrics.items() if name in old and not _same_value(old[name].value, value.value)]
        if moved or set(old) - set(metrics):
            why = f"values of {sorted(moved)} would change" if moved else f"{sorted(set(old) - set(metrics))} not in its samples"
            summary.skipped.append((run.pk, run.task, f"{why}: its scoring changed, re-score it instead"))
            return
        changed = sum(1 for name, value in metrics.items() if name not in old or score_changed(old[name], value))
        if not changed:
            return
        summary.runs_changed += 1
        summary.scores_changed += changed
        if dry_run:
            return
        scores_replace(run, metrics, reason=REASON, gone_reason=REASON, code_version=run.code_version,
                       rewrite_unchanged=False)  # fmt: skip
        run.results = json_safe({name: value.as_dict() for name, value in metrics.items()})
        protocol = dict(run.protocol or {})
        protocol["intervals_recomputed"] = [*protocol.get("intervals_recomputed", []), json_safe(code_version)]
        run.protocol = protocol
        run.save(update_fields=["results", "protocol"])


def runs_recompute_intervals(*, task: str = "", dry_run: bool = False) -> RecomputeSummary:
    """Recompute the intervals of every finished run (of ``task`` when given); one transaction per run."""
    runs = EvaluationRun.objects.filter(status=EvaluationRun.Status.FINISHED)
    if task:
        runs = runs.filter(task=task)
    run_ids = list(runs.order_by("pk").values_list("pk", flat=True))
    summary = RecomputeSummary(runs=len(run_ids))
    code_version = engine_code_version()
    for run_id in run_ids:
        _recompute_one(run_id, dry_run=dry_run, code_version=code_version, summary=summary)
    log.info("intervals recomputed for %d runs: %d scores changed in %d runs, %d skipped",
             summary.runs, summary.scores_changed, summary.runs_changed, len(summary.skipped))  # fmt: skip
    return summary
