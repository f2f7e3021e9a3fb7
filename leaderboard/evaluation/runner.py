"""Running the leaderboard suite on a submission with ``evalcore.engine`` and storing what it produced.

Results are keyed (submission, suite, task), (run, metric) and (run, doc_id): a retry after a
worker died skips tasks already FINISHED and overwrites anything half-written, never duplicating
rows. Scores that change are kept in :class:`leaderboard.models.ScoreHistory`.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import os
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from leaderboard import services
from leaderboard.models import BenchmarkSuite, EvaluationRun, SampleRecord, Score, ScoreHistory, Submission
from leaderboard.progress import CountingBackend

log = logging.getLogger(__name__)
SEED = 0


def json_safe(value):
    """``value`` as PostgreSQL's jsonb accepts it: non-finite floats as strings, no NUL characters.

    ``float("-inf")`` reads the strings back, so re-scoring from stored records loses nothing.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {str(k).replace("\x00", "\ufffd"): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int)):
        return value
    return json_safe(json.loads(json.dumps(value, default=str)))


def _finite(x):
    return float(x) if x is not None and math.isfinite(x) else None


def _score_changed(old: Score, new) -> bool:
    return (old.value, old.stderr, old.ci_low, old.ci_high, old.n) != (
        _finite(new.value), _finite(new.stderr), _finite(new.ci_low), _finite(new.ci_high), new.n,
    )  # fmt: skip


def run_store(*, submission: Submission, suite: BenchmarkSuite, task_result, protocol: dict,
              code_version: dict) -> EvaluationRun:  # fmt: skip
    """Store one task's metrics, protocol and per-document records (overwriting an earlier attempt)."""
    from evalcore.engine.results import SAMPLE_FIELDS

    metrics = task_result.metrics
    with transaction.atomic():
        run, _ = EvaluationRun.objects.select_for_update().get_or_create(
            submission=submission, suite=suite, task=task_result.task
        )
        run.status = EvaluationRun.Status.FINISHED
        run.results = json_safe({name: value.as_dict() for name, value in metrics.items()})
        run.protocol = json_safe(protocol)
        run.config_sha256 = str(protocol.get("config_sha256", ""))[:64]
        run.code_version = json_safe(code_version)
        run.wall_time_s = protocol.get("wall_time_s")
        run.finished_at = timezone.now()
        run.full_clean()
        run.save()
        records = [
            SampleRecord(run=run, doc_id=r["doc_id"], payload=json_safe({k: r[k] for k in SAMPLE_FIELDS if k in r}))
            for r in task_result.records
        ]
        SampleRecord.objects.bulk_create(
            records, batch_size=500, update_conflicts=True, unique_fields=["run", "doc_id"], update_fields=["payload"]
        )
        SampleRecord.objects.filter(run=run, doc_id__gte=len(records)).delete()
        old_scores = {s.metric: s for s in run.scores.all()}
        history = []
        for metric, value in metrics.items():
            old = old_scores.pop(metric, None)
            if old is not None and _score_changed(old, value):
                history.append(_history(old, "re-run", code_version))
            score_store(run, metric, value)
        for gone in old_scores.values():
            history.append(_history(gone, "metric no longer reported", code_version))
            gone.delete()
        ScoreHistory.objects.bulk_create(history)
    return run


def score_store(run, metric: str, value) -> None:
    """Write one metric's value, standard error, interval and n for ``run`` (insert or overwrite)."""
    Score.objects.update_or_create(
        run=run, metric=metric,
        defaults={
            "value": _finite(value.value), "stderr": _finite(value.stderr), "ci_low": _finite(value.ci_low),
            "ci_high": _finite(value.ci_high), "n": value.n, "higher_is_better": value.higher_is_better,
            "interval": value.interval,
        },
    )  # fmt: skip


def _history(score: Score, reason: str, code_version: dict) -> ScoreHistory:
    return ScoreHistory(
        run_id=score.run_id, metric=score.metric, value=score.value, stderr=score.stderr, ci_low=score.ci_low,
        ci_high=score.ci_high, n=score.n, reason=reason, code_version=json_safe(code_version),
    )  # fmt: skip


def _task_files_signature(paths: tuple[str, ...]) -> tuple:
    from evalcore.engine.registry import BUNDLED

    stats = [f.stat() for folder in (BUNDLED, *map(Path, paths)) if folder.is_dir() for f in folder.rglob("*")]
    return len(stats), max((s.st_mtime_ns for s in stats), default=0)


@functools.lru_cache(maxsize=4)
def _task_index(paths: tuple[str, ...], signature: tuple):
    """Parsing every task file takes seconds: a worker keeps the index until a task file changes."""
    from evalcore.engine import TaskIndex

    return TaskIndex(list(paths))


def _suite_plan(suite: BenchmarkSuite):
    """[(TaskConfig, entry)] for every leaf task of the suite (groups and tags expanded)."""
    paths = tuple(str(p) for p in settings.LEADERBOARD_TASK_PATHS)
    index = _task_index(paths, _task_files_signature(paths))
    plan, seen = [], set()
    for entry in suite.tasks:
        tasks, _groups = index.resolve([entry["task"]])
        for config in tasks:
            if config.task not in seen:
                seen.add(config.task)
                plan.append((config, entry))
    return plan


def chat_template_supported() -> bool:
    """Whether the engine can evaluate with a model's chat template (``evaluate_task(apply_chat_template=)``)."""
    from evalcore.engine import evaluate_task

    return "apply_chat_template" in inspect.signature(evaluate_task).parameters


def request_cache_path(submission_id: int) -> Path:
    """Model answers of a running submission, local to the worker host (SQLite wants a local disk).

    A retry on the same host answers the requests it already computed from here; a finished run
    deletes it.
    """
    return Path(settings.LEADERBOARD_REQUEST_CACHE_DIR) / f"submission-{submission_id}.sqlite3"


def submission_run_suite(submission_id: int) -> None:
    """Evaluate a RUNNING submission on the current suite; raises on any failure (the task records it)."""
    from evalcore.engine import evaluate_task
    from evalcore.engine.cache import CachedBackend, RequestCache
    from evalcore.engine.results import code_version as engine_code_version
    from evalcore.models import load_backend

    submission = Submission.objects.get(pk=submission_id)
    if submission.status != Submission.Status.RUNNING:
        raise RuntimeError(f"submission {submission_id} is {submission.status}, not RUNNING")
    if submission.apply_chat_template and not chat_template_supported():
        raise RuntimeError(
            "the evaluation engine cannot apply chat templates yet; submit again without 'apply chat template'"
        )
    os.environ.setdefault("PODIUM_DATA_DIR", str(settings.PODIUM_DATA_DIR))
    suite = services.suite_current()
    plan = _suite_plan(suite)
    finished = set(
        EvaluationRun.objects.filter(
            submission=submission, suite=suite, status=EvaluationRun.Status.FINISHED
        ).values_list("task", flat=True)
    )
    progress = {
        "suite": f"{suite.name} v{suite.version}",
        "tasks_total": len(plan),
        "tasks_done": sum(1 for config, _ in plan if config.task in finished),
        "current_task": None,
        "tasks": {config.task: ("finished" if config.task in finished else "waiting") for config, _ in plan},
    }
    services.submission_progress(submission_id, progress)
    if progress["tasks_done"] == len(plan):
        return
    def report(done: int, total: int) -> None:
        progress["requests"] = {"done": done, "total": total}
        services.submission_progress(submission_id, progress)

    log.info("loading %s (%s) from %s", submission.model_name, submission.precision, submission.storage_path)
    model = load_backend("hf", path=submission.storage_path, dtype=submission.precision)
    cache = None
    try:
        if model.identity.weights_sha256 != submission.weight_sha256:
            raise RuntimeError("the checkpoint's weights changed after it was submitted (their hash differs)")
        cache = RequestCache(request_cache_path(submission_id))
        cached = CachedBackend(model, cache)
        backend = CountingBackend(cached, report)
        code_version = engine_code_version()
        for config, entry in plan:
            if config.task in finished:
                continue
            progress.update(current_task=config.task, requests={"done": 0, "total": 0})
            progress["tasks"][config.task] = "running"
            services.submission_progress(submission_id, progress)
            backend.reset()
            hits, misses = cached.hits, cached.misses
            log.info("task %s: num_fewshot=%s limit=%s", config.task, entry["num_fewshot"], entry["limit"])
            extra = {"apply_chat_template": True} if submission.apply_chat_template else {}
            result = evaluate_task(
                backend, config, num_fewshot=entry["num_fewshot"], limit=entry["limit"], seed=SEED, **extra
            )
            protocol = {
                **result.protocol,
                "suite": {"name": suite.name, "version": suite.version},
                "model": model.identity.as_dict(),
                "precision": submission.precision,
                "apply_chat_template": submission.apply_chat_template,
                "seed": SEED,
            }
            run_store(submission=submission, suite=suite, task_result=result, protocol=protocol,
                      code_version=code_version)  # fmt: skip
            summary = ", ".join(f"{k}={v.value:.4f}" for k, v in result.metrics.items() if v.value is not None)
            log.info("task %s: %d documents, %s; %d requests answered from the request cache, %d computed",
                     config.task, len(result.records), summary, cached.hits - hits, cached.misses - misses)  # fmt: skip
            progress["tasks"][config.task] = "finished"
            progress["tasks_done"] += 1
            services.submission_progress(submission_id, progress)
    finally:
        if cache is not None:
            cache.close()
        model.close()
    request_cache_path(submission_id).unlink(missing_ok=True)  # every result is stored: the cache is spent
    for suffix in ("-wal", "-shm"):
        Path(f"{request_cache_path(submission_id)}{suffix}").unlink(missing_ok=True)
    progress.update(current_task=None, requests=None)
    services.submission_progress(submission_id, progress)
