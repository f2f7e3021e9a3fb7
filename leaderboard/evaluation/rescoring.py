"""Re-scoring stored runs from their per-sample records: a fixed metric or filter costs no GPU time.

:func:`runs_rescore` rebuilds the engine's per-document records from :class:`SampleRecord` payloads,
scores them again with ``evalcore.engine.score_records`` / ``aggregate`` (what ``evalcore.engine.rescore``
and ``python -m evalcore rescore`` run) under the task's current config (or a given one), and
stores the new numbers: every changed score keeps its old values in :class:`ScoreHistory`, the
run's protocol records the new config hash and code version. No model is loaded. Running it again
with the same config changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from evalcore.engine import TaskConfig, aggregate, score_records, task_config_from_mapping
from evalcore.engine.results import code_version as engine_code_version
from evalcore.engine.scoring import runs_programs, tampering_summary
from leaderboard import dispatch
from leaderboard.evaluation.score_store import json_safe, scores_replace, scores_touch
from leaderboard.evaluation.suites import SEED
from leaderboard.evaluation.tampering import tampering_flag
from leaderboard.evaluation.task_index import task_config_current
from leaderboard.models import EvaluationRun, SampleRecord

log = logging.getLogger(__name__)
# Numbers the engine may write as -inf / nan, which jsonb stores as strings (see score_store.json_safe).
FLOAT_FIELDS = ("logprob",)
FLOAT_LIST_FIELDS = ("choice_logprobs", "unconditional_logprobs")


@dataclass(frozen=True)
class RescoreSummary:
    task: str
    config_sha256: str
    runs: int
    runs_changed: int
    scores_changed: int


def record_from_payload(payload: dict) -> dict:
    """The engine's record as ``--log-samples`` wrote it: stored "-inf"/"nan" strings read back as floats.

    NUL characters in texts were stored as U+FFFD and stay so (no bundled filter reads them).
    """
    record = dict(payload)
    for key in FLOAT_FIELDS:
        if record.get(key) is not None:
            record[key] = float(record[key])
    for key in FLOAT_LIST_FIELDS:
        if record.get(key) is not None:
            record[key] = [float(x) for x in record[key]]
    return record


def _check(task: str, admin, comment: str) -> str:
    if not getattr(admin, "is_staff", False):
        raise ValidationError("Only staff can re-score runs.")
    comment = (comment or "").strip()
    if not comment:
        raise ValidationError("Say why the runs are re-scored (a comment is required).")
    if not task:
        raise ValidationError("Name the task to re-score.")
    return comment


def _rescore_one(run_id: int, config, *, admin, comment: str, code_version: dict) -> int:
    """Re-score one run in its own transaction; the number of scores whose values changed."""
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        stored = list(SampleRecord.objects.filter(run=run).order_by("doc_id"))
        if not stored:
            log.warning("run %s (%s) has no stored samples: not re-scored", run.pk, run.task)
            return 0
        scored = score_records(config, [record_from_payload(s.payload) for s in stored])
        metrics = aggregate(config, scored, seed=SEED)
        reason = f"re-scored by {admin.get_username()}: {comment}"[:300]
        changed = scores_replace(run, metrics, reason=reason, gone_reason=f"{reason} (metric no longer reported)"[:300],
                                 code_version=run.code_version, rewrite_unchanged=False)  # fmt: skip
        updated = []
        for sample, record in zip(stored, scored, strict=True):
            new = json_safe({"filtered": record["filtered"], "metrics": record["metrics"],
                             "tampering": record.get("tampering", [])})  # fmt: skip
            if {k: sample.payload.get(k) for k in new} != new:
                sample.payload = {**sample.payload, **new}
                updated.append(sample)
        SampleRecord.objects.bulk_update(updated, ["payload"], batch_size=500)
        if updated and not changed:
            # Same numbers from other documents: caches keyed on the scores' times (comparisons) must see it.
            scores_touch(run)
        if not changed and not updated and run.config_sha256 == config.sha256:
            return 0  # already scored this way: nothing to record
        previous = {"config_sha256": run.config_sha256, "code_version": run.code_version}
        run.results = json_safe({name: value.as_dict() for name, value in metrics.items()})
        run.config_sha256 = config.sha256
        run.code_version = json_safe(code_version)
        protocol = dict(run.protocol)
        protocol.update(
            config_sha256=config.sha256,
            config=json_safe(config.raw),
            version=config.version,
            source=config.source,
        )
        protocol["rescores"] = [
            *protocol.get("rescores", []),
            json_safe({
                "at": timezone.now().isoformat(), "by": admin.get_username(), "comment": comment,
                "scores_changed": changed, "samples_changed": len(updated), **{f"previous_{k}": v for k, v in previous.items()},
            }),
        ]  # fmt: skip
        if runs_programs(config):
            protocol["tampering"] = tampering_summary(scored)
        run.protocol = protocol
        run.save(update_fields=["results", "config_sha256", "code_version", "protocol"])
    tampering_flag(run.submission_id, run.task, protocol, len(scored))
    return changed


def runs_rescore(*, task: str, admin, comment: str, task_config=None) -> RescoreSummary:
    """Re-score every finished run of ``task`` from its stored samples (one transaction per run).

    ``task_config``: an ``evalcore.engine.TaskConfig`` (or a task mapping) to score with; by default
    the task's current config. Raises ValidationError when the caller is not staff, the comment is
    empty, or the config is not this task's.
    """
    comment = _check(task, admin, comment)
    if task_config is None:
        config = task_config_current(task)
    elif isinstance(task_config, TaskConfig):
        config = task_config
    else:
        try:
            config = task_config_from_mapping(dict(task_config), source="the re-scoring config")
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
    if config.task != task:
        raise ValidationError(f"The config is for task {config.task!r}, not {task!r}.")
    code_version = engine_code_version()
    run_ids = list(
        EvaluationRun.objects.filter(task=task, status=EvaluationRun.Status.FINISHED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    runs_changed = scores_changed = 0
    for run_id in run_ids:
        changed = _rescore_one(run_id, config, admin=admin, comment=comment, code_version=code_version)
        runs_changed += bool(changed)
        scores_changed += changed
    log.info("re-scored %d runs of %s (config %s): %d scores changed in %d runs",
             len(run_ids), task, config.sha256[:12], scores_changed, runs_changed)  # fmt: skip
    return RescoreSummary(task=task, config_sha256=config.sha256, runs=len(run_ids), runs_changed=runs_changed,
                          scores_changed=scores_changed)  # fmt: skip


def rescore_enqueue(*, task: str, admin, comment: str) -> None:
    """Check the request and send ``leaderboard.tasks.run_rescore`` once the transaction commits."""
    comment = _check(task, admin, comment)
    if not EvaluationRun.objects.filter(task=task, status=EvaluationRun.Status.FINISHED).exists():
        raise ValidationError(f"No finished run of {task!r} to re-score.")
    task_config_current(task)  # fail here, on the form, rather than in the worker
    dispatch.run_rescore_send(task, admin.pk, comment)
