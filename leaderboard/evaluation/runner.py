"""Running the leaderboard suite on a submission with ``evalcore.engine`` and storing what it produced.

Results are keyed (submission, suite, task), (run, metric) and (run, doc_id): a retry after a
worker died skips tasks already FINISHED and overwrites anything half-written, never duplicating
rows. Scores that change are kept in :class:`leaderboard.models.ScoreHistory`.

An endpoint submission (an arena model served by an OpenAI-compatible endpoint) is run through the
``openai-chat`` backend: generation tasks as conversations, the server applying the chat template.
Log-likelihood tasks are scored through the server's ``/completions`` when one probe request shows
that it returns prompt log-probabilities; otherwise each is stored SKIPPED with the reason, and the
rest of the suite runs. The protocol records the backend, the endpoint URL (without credentials),
who applied the chat template and the generation settings.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import evalcore.models
from evalcore.engine import evaluate_task
from evalcore.engine.cache import CachedBackend, RequestCache
from evalcore.engine.results import SAMPLE_FIELDS
from evalcore.engine.results import code_version as engine_code_version
from evalcore.models.base import LoglikelihoodRequest
from evalcore.models.endpoint import EndpointError
from leaderboard.evaluation import contamination
from leaderboard.evaluation.progress import CountingBackend
from leaderboard.evaluation.score_store import json_safe, scores_replace
from leaderboard.evaluation.suites import SEED, suite_current, suite_plan
from leaderboard.evaluation.tampering import tampering_flag
from leaderboard.models import BenchmarkSuite, EvaluationRun, SampleRecord, Submission
from leaderboard.submissions.lifecycle import submission_progress

log = logging.getLogger(__name__)


def run_store(*, submission: Submission, suite: BenchmarkSuite, task_result, protocol: dict,
              code_version: dict) -> EvaluationRun:  # fmt: skip
    """Store one task's metrics, protocol and per-document records (overwriting an earlier attempt)."""
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
        scores_replace(run, metrics, reason="re-run", gone_reason="metric no longer reported",
                       code_version=code_version, rewrite_unchanged=True)  # fmt: skip
    return run


def request_cache_path(submission_id: int) -> Path:
    """Model answers of a running submission, local to the worker host (SQLite wants a local disk).

    A retry on the same host answers the requests it already computed from here; a finished run
    deletes it.
    """
    return Path(settings.LEADERBOARD_REQUEST_CACHE_DIR) / f"submission-{submission_id}.sqlite3"


def _request_cache_remove(submission_id: int) -> None:
    request_cache_path(submission_id).unlink(missing_ok=True)  # every result is stored: the cache is spent
    for suffix in ("-wal", "-shm"):
        Path(f"{request_cache_path(submission_id)}{suffix}").unlink(missing_ok=True)


def url_redacted(url: str) -> str:
    """``url`` without user name, password, query or fragment: what a protocol may show of an endpoint."""
    parts = urllib.parse.urlsplit(str(url))
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _endpoint_protocol(submission: Submission, model, config) -> dict:
    """What an endpoint run adds to a task's protocol: backend, URL, who applied the chat template."""
    generation = config.output_type == "generate_until"
    template = "applied by the server (chat completions)" if generation else (
        "the served model's tokenizer (tokenizer=DIR)" if model.tokenizer is not None else "none: plain prompts"
    )  # fmt: skip
    return {
        "backend": submission.endpoint.get("backend", ""),
        "url": url_redacted(model.base_url),
        "served_model": model.model_name,
        "api": "chat/completions" if generation else "completions (echo, logprobs)",
        "chat_template": template,
        "api_key_env": model.api_key_env or None,
    }


def _task_run(submission: Submission, suite: BenchmarkSuite, model, backend, config, entry: dict,
              code_version: dict):  # fmt: skip
    """Evaluate one task of the plan and store it; the engine's task result."""
    log.info("task %s: num_fewshot=%s limit=%s", config.task, entry["num_fewshot"], entry["limit"])
    template = submission.apply_chat_template
    if submission.is_endpoint and config.output_type != "generate_until":
        template = template and model.tokenizer is not None  # through /completions only with the model's template
    extra = {"apply_chat_template": True} if template else {}
    result = evaluate_task(backend, config, num_fewshot=entry["num_fewshot"], limit=entry["limit"], seed=SEED, **extra)
    identity = model.identity.as_dict()
    protocol = {
        **result.protocol,
        "suite": {"name": suite.name, "version": suite.version},
        "model": identity,
        "precision": submission.precision,
        "apply_chat_template": template,
        "seed": SEED,
    }
    if submission.is_endpoint:
        identity["extra"] = {**identity.get("extra", {}), "base_url": url_redacted(model.base_url)}
        protocol["endpoint"] = _endpoint_protocol(submission, model, config)
    run_store(submission=submission, suite=suite, task_result=result, protocol=protocol, code_version=code_version)
    tampering_flag(submission.pk, config.task, protocol, len(result.records))
    return result


def run_skip(*, submission: Submission, suite: BenchmarkSuite, config, reason: str, protocol: dict) -> EvaluationRun:
    """Store a task that was not run as SKIPPED with ``reason`` (a retry that can run it overwrites it)."""
    with transaction.atomic():
        run, _ = EvaluationRun.objects.select_for_update().get_or_create(submission=submission, suite=suite,
                                                                        task=config.task)  # fmt: skip
        run.status = EvaluationRun.Status.SKIPPED
        run.results = {}
        run.protocol = json_safe({"task": config.task, "output_type": config.output_type, "skipped": reason,
                                  "suite": {"name": suite.name, "version": suite.version}, **protocol})  # fmt: skip
        run.config_sha256 = config.sha256[:64]
        run.finished_at = timezone.now()
        run.full_clean()
        run.save()
        run.scores.all().delete()
        run.samples.all().delete()
    return run


def _endpoint_load(submission: Submission, plan: list):
    """The ``openai-chat`` backend of an endpoint submission, scoring log-likelihoods through the
    server's ``/completions`` if one probe request shows it can; (backend, why it cannot or "")."""
    spec = submission.endpoint
    if spec.get("backend") != "openai-chat" or not isinstance(spec.get("args"), dict):
        raise RuntimeError(f"submission {submission.pk} has no usable endpoint ({spec!r})")
    model = evalcore.models.load_backend("openai-chat", **{**spec["args"], "completions_logprobs": True})
    if all(config.output_type == "generate_until" for config, _ in plan):
        return model, ""
    try:
        model.loglikelihood([LoglikelihoodRequest(context="The capital of France is", continuation=" Paris")])
    except (EndpointError, ValueError) as exc:
        if isinstance(exc, EndpointError) and exc.status is None:
            model.close()
            raise  # unreachable (after the client's retries): the run fails with this reason
        model.completions_logprobs = False
        return model, f"the endpoint gives no prompt log-probabilities on /completions ({exc})"[:500]
    return model, ""


def _skip_reason(model, config, loglikelihood_refused: str) -> str:
    """Why an endpoint cannot score ``config`` (empty: it can)."""
    if config.output_type == "generate_until":
        return ""
    if loglikelihood_refused:
        return f"log-likelihood task ({config.output_type}) not scored: {loglikelihood_refused}"
    if config.output_type == "loglikelihood_rolling" and not model.prefix_text:
        return "rolling log-likelihood task not scored: the endpoint's model_args give no prefix_text (its BOS text)"
    return ""


def _plan_run(submission: Submission, suite: BenchmarkSuite, plan: list, finished: set, progress: dict) -> None:
    """Load the model and evaluate every task of ``plan`` not yet ``finished``, reporting progress."""
    submission_id = submission.pk

    def report(done: int, total: int) -> None:
        progress["requests"] = {"done": done, "total": total}
        submission_progress(submission_id, progress)

    refused = ""
    if submission.is_endpoint:
        log.info("evaluating %s through its endpoint %s", submission.model_name,
                 url_redacted(submission.endpoint.get("args", {}).get("base_url", "")))  # fmt: skip
        model, refused = _endpoint_load(submission, plan)
        if refused:
            log.warning("%s: %s; its log-likelihood tasks are skipped", submission.model_name, refused)
    else:
        log.info("loading %s (%s) from %s", submission.model_name, submission.precision, submission.storage_path)
        model = evalcore.models.load_backend(
            settings.LEADERBOARD_EVAL_BACKEND,
            **{**settings.LEADERBOARD_EVAL_BACKEND_ARGS, "path": submission.storage_path, "dtype": submission.precision},
        )
    cache = None
    try:
        if not submission.is_endpoint and model.identity.weights_sha256 != submission.weight_sha256:
            raise RuntimeError("the checkpoint's weights changed after it was submitted (their hash differs)")
        cache = RequestCache(request_cache_path(submission_id))
        cached = CachedBackend(model, cache)
        backend = CountingBackend(cached, report)
        code_version = engine_code_version()
        for config, entry in plan:
            if config.task in finished:
                continue
            reason = _skip_reason(model, config, refused) if submission.is_endpoint else ""
            if reason:
                run_skip(submission=submission, suite=suite, config=config, reason=reason,
                         protocol={"endpoint": _endpoint_protocol(submission, model, config)})  # fmt: skip
                log.info("task %s skipped: %s", config.task, reason)
                progress["tasks"][config.task] = f"skipped: {reason}"[:300]
                progress["tasks_done"] += 1
                submission_progress(submission_id, progress)
                continue
            progress.update(current_task=config.task, requests={"done": 0, "total": 0})
            progress["tasks"][config.task] = "running"
            submission_progress(submission_id, progress)
            backend.reset()
            hits, misses = cached.hits, cached.misses
            result = _task_run(submission, suite, model, backend, config, entry, code_version)
            summary = ", ".join(f"{k}={v.value:.4f}" for k, v in result.metrics.items() if v.value is not None)
            log.info("task %s: %d documents, %s; %d requests answered from the request cache, %d computed",
                     config.task, len(result.records), summary, cached.hits - hits, cached.misses - misses)  # fmt: skip
            progress["tasks"][config.task] = "finished"
            progress["tasks_done"] += 1
            submission_progress(submission_id, progress)
        if submission.is_endpoint:  # a chat model asked to go on with a text answers it instead: no evidence either way
            log.info("%s: no memorisation probe (it continues text; a chat endpoint answers it)", submission.model_name)
        else:
            _probe_run(submission, plan, backend, progress)
    finally:
        if cache is not None:
            cache.close()
        model.close()


def _probe_run(submission: Submission, plan: list, backend: CountingBackend, progress: dict) -> None:
    """The memorisation probe of every task of the plan with a training split (not yet probed)."""
    for config in contamination.probe_pending(submission, plan):
        progress.update(current_task=f"memorisation probe: {config.task}", requests={"done": 0, "total": 0})
        submission_progress(submission.pk, progress)
        backend.reset()
        contamination.probe_run(submission, config, backend)


def submission_run_suite(submission_id: int) -> None:
    """Evaluate a RUNNING submission on the current suite; raises on any failure (the task records it)."""
    submission = Submission.objects.get(pk=submission_id)
    if submission.status != Submission.Status.RUNNING:
        raise RuntimeError(f"submission {submission_id} is {submission.status}, not RUNNING")
    os.environ.setdefault("PODIUM_DATA_DIR", str(settings.PODIUM_DATA_DIR))
    suite = suite_current()
    plan = suite_plan(suite)
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
    submission_progress(submission_id, progress)
    probes = [] if submission.is_endpoint else contamination.probe_pending(submission, plan)
    if progress["tasks_done"] == len(plan) and not probes:
        contamination.flag_check(submission_id)
        return
    _plan_run(submission, suite, plan, finished, progress)
    contamination.flag_check(submission_id)
    _request_cache_remove(submission_id)
    progress.update(current_task=None, requests=None)
    submission_progress(submission_id, progress)
