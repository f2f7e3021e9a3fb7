"""Reads behind a score: a run's protocol, its per-document records, paired comparisons, export rows.

Per-document records are only ever read a page at a time or streamed from a server-side cursor.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator

import numpy as np
from django.core.cache import cache
from django.core.paginator import Paginator
from django.db.models import Max, Q, QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast

from evalcore.stats import paired_bootstrap_difference
from leaderboard.models import EvaluationRun, SampleRecord, Score, ScoreHistory, Submission
from leaderboard.runs.benchmarks import BENCHMARKS, benchmark_key, benchmark_label, headline_metric

SAMPLES_PER_PAGE = 20
COMPARE_ROUNDS = 2000
COMPARE_SEED = 20240601
NO_ANSWER = ("[invalid]", "")
_CHUNK = 500


def _is_staff(viewer) -> bool:
    return bool(getattr(viewer, "is_staff", False))


def public_runs() -> QuerySet[EvaluationRun]:
    """Finished runs of published submissions not waiting for or refused by review (hidden ones included)."""
    return EvaluationRun.objects.filter(
        status=EvaluationRun.Status.FINISHED,
        submission__private=False,
        submission__review_state__in=(
            Submission.Review.NONE, Submission.Review.APPROVED, Submission.Review.HIDDEN,
        ),
    )  # fmt: skip


def runs_visible(viewer) -> QuerySet[EvaluationRun]:
    if _is_staff(viewer):
        return EvaluationRun.objects.filter(status=EvaluationRun.Status.FINISHED)
    if viewer is not None and viewer.is_authenticated:
        return EvaluationRun.objects.filter(
            Q(pk__in=public_runs().values("pk")) | Q(submission__owner=viewer),
            status=EvaluationRun.Status.FINISHED,
        )
    return public_runs()


def run_visible(viewer, run_id: int) -> EvaluationRun | None:
    """The run if the viewer may see it (published, or theirs, or staff), else None: nobody learns it exists."""
    return (
        runs_visible(viewer)
        .select_related("submission", "submission__language_model", "suite")
        .filter(pk=run_id)
        .first()
    )


def _fmt_metric(score) -> dict:
    return {
        "metric": score.metric, "value": score.value, "stderr": score.stderr, "ci_low": score.ci_low,
        "ci_high": score.ci_high, "n": score.n, "higher_is_better": score.higher_is_better,
        "interval": getattr(score, "interval", ""),
    }  # fmt: skip


def run_headline_metric(run: EvaluationRun) -> str | None:
    """The metric the board shows for this run's task."""
    return headline_metric(run.task, tuple(Score.objects.filter(run=run).values_list("metric", flat=True)))


def run_protocol(run: EvaluationRun, *, doc_id: int | None = None, viewer=None) -> dict:
    """What produced the run's numbers: protocol, versions, model identity, one document's exact prompt.
    An endpoint's address only for staff (:meth:`Submission.endpoint_withheld`)."""
    protocol = run.submission.endpoint_withheld(run.protocol or {}, viewer)
    record = (
        SampleRecord.objects.filter(run=run, doc_id=doc_id if doc_id is not None else 0)
        .values_list("doc_id", "payload")
        .first()
    )
    document = None
    if record is not None:
        payload = record[1]
        document = {
            "doc_id": record[0],
            "prompt": payload.get("prompt", ""),
            "fewshot_ids": payload.get("fewshot_ids"),
            "target": payload.get("target"),
            "choices": payload.get("choices"),
        }
    siblings = list(
        EvaluationRun.objects.filter(submission_id=run.submission_id, suite_id=run.suite_id)
        .order_by("task")
        .values_list("id", "task")
    )
    key = benchmark_key(run.task)
    scores = list(run.scores.order_by("metric"))
    return {
        "run": run,
        "submission": run.submission,
        "benchmark": benchmark_label(key),
        "headline_metric": headline_metric(run.task, tuple(s.metric for s in scores)),
        "scores": [_fmt_metric(s) for s in scores],
        "history": list(
            ScoreHistory.objects.filter(run=run)
            .order_by("metric", "-replaced_at")
            .values("metric", "value", "ci_low", "ci_high", "n", "reason", "replaced_at")[:50]
        ),
        "protocol": protocol,
        "decoding": protocol.get("decoding"),
        "model_identity": protocol.get("model") or {},
        "code_version": run.code_version or {},
        "config": protocol.get("config"),
        "document": document,
        "n_docs": SampleRecord.objects.filter(run=run).count(),
        "same_benchmark": [
            (pk, task) for pk, task in siblings if benchmark_key(task) == key and pk != run.pk
        ][:100],
    }


def _metric_value(metric: str):
    return KeyTransform(metric, KeyTransform("metrics", "payload"))


def samples_page(run: EvaluationRun, *, metric: str | None, only: str = "", page: int = 1) -> dict:
    """One page of a run's records, optionally only wrong answers (``metric`` = 0) or no answer extracted.

    "No answer extracted" applies to generated answers: the first filtered response of the metric's
    pipeline is the regex filter's fallback ``[invalid]`` or empty.
    """
    qs = SampleRecord.objects.filter(run=run).order_by("doc_id")
    pipeline = None
    if metric and "," in metric:
        pipeline = metric.split(",", 1)[1]
    elif metric:
        pipeline = "none"
    if only == "wrong" and metric:
        qs = qs.annotate(_m=_metric_value(metric)).filter(_m=0)
    elif only == "no_answer":
        if pipeline is None or (run.protocol or {}).get("output_type") != "generate_until":
            qs = qs.none()
        else:
            first = KeyTextTransform("0", KeyTransform(pipeline, KeyTransform("filtered", "payload")))
            qs = qs.annotate(_a=first).filter(Q(_a__in=NO_ANSWER) | Q(_a__isnull=True))
    paginator = Paginator(qs, SAMPLES_PER_PAGE, allow_empty_first_page=True)
    if page > paginator.num_pages:
        raise ValueError(f"page {page} is past the last page ({paginator.num_pages})")
    current = paginator.page(page)
    rows = []
    for record in current.object_list:
        p = record.payload
        filtered = p.get("filtered") or {}
        answer = None
        if pipeline is not None and isinstance(filtered.get(pipeline), list) and filtered[pipeline]:
            answer = filtered[pipeline][0]
        predicted = None
        if p.get("choices") and p.get("choice_logprobs"):
            lps = [float(x) for x in p["choice_logprobs"]]
            predicted = p["choices"][int(np.argmax(lps))]
        value = (p.get("metrics") or {}).get(metric) if metric else None
        rows.append({
            "doc_id": record.doc_id, "prompt": p.get("prompt", ""), "target": p.get("target"),
            "choices": p.get("choices"), "predicted": predicted, "responses": p.get("responses"),
            "answer": answer, "metrics": p.get("metrics") or {}, "value": value,
            "no_answer": answer in NO_ANSWER if pipeline is not None and "responses" in p else False,
            "fewshot_ids": p.get("fewshot_ids"),
        })  # fmt: skip
    return {"page": current, "rows": rows, "count": paginator.count, "pipeline": pipeline}


def _per_doc_values(run: EvaluationRun, metric: str) -> dict[tuple[str, int], float]:
    rows = (
        SampleRecord.objects.filter(run=run)
        .annotate(_v=KeyTextTransform(metric, KeyTransform("metrics", "payload")))
        .order_by()
        .values_list("doc_id", "_v")
        .iterator(chunk_size=5000)
    )
    values = {}
    for doc_id, raw in rows:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            values[(run.task, doc_id)] = value
    return values


def compare_runs(viewer, *, a: str, b: str, task: str) -> dict:
    """Paired comparison of submissions ``a`` and ``b`` (public ids) on a task or a benchmark (its leaf tasks).

    Documents both ran (same task, same document id) are paired; the difference ``a - b`` of the
    headline metric gets a seeded paired-bootstrap interval (:data:`COMPARE_ROUNDS` rounds), kept in
    the cache per pair of runs. Raises ValueError with a message the page shows.
    """
    if a == b:
        raise ValueError("pick two different submissions")
    visible = runs_visible(viewer).select_related("submission", "suite")
    bench = next((b for b in BENCHMARKS if b.key == task), None)

    def runs_of(public_id: str) -> dict[str, EvaluationRun]:
        qs = visible.filter(submission__public_id=public_id).order_by("suite__version", "id")
        chosen = {}
        for run in qs:
            if run.task == task or (bench is not None and bench.matches(run.task)):
                chosen[run.task] = run  # the newest suite's run wins
        return chosen

    runs_a, runs_b = runs_of(a), runs_of(b)
    if not runs_a or not runs_b:
        missing = [str(s) for s, runs in ((a, runs_a), (b, runs_b)) if not runs]
        raise ValueError(f"no visible finished run of {task!r} for submission(s) {', '.join(missing)}")
    shared = sorted(set(runs_a) & set(runs_b))
    if not shared:
        raise ValueError("the two submissions ran no task in common")
    metric = headline_metric(
        shared[0], tuple(Score.objects.filter(run=runs_a[shared[0]]).values_list("metric", flat=True))
    )
    if metric is None:
        raise ValueError(
            f"{task!r} reports no metric the leaderboard compares (accuracy, exact match, pass@1, F1)"
        )
    pairs = [(runs_a[t], runs_b[t]) for t in shared]
    # A re-score rewrites records and scores: the newest score time of these runs keys the cache too.
    rescored = Score.objects.filter(run__in=[r for pair in pairs for r in pair]).aggregate(
        t=Max("updated_at")
    )["t"]
    identity = f"{[(ra.pk, rb.pk) for ra, rb in pairs]}|{metric}|{rescored}|{COMPARE_ROUNDS}|{COMPARE_SEED}"
    key = "lb-compare:" + hashlib.sha256(identity.encode()).hexdigest()
    result = cache.get(key)
    if result is None:
        values_a, values_b = {}, {}
        for t in shared:
            values_a.update(_per_doc_values(runs_a[t], metric))
            values_b.update(_per_doc_values(runs_b[t], metric))
        docs = sorted(set(values_a) & set(values_b))
        if not docs:
            raise ValueError(f"no document has a numeric {metric!r} in both runs")
        xa = np.array([values_a[d] for d in docs])
        xb = np.array([values_b[d] for d in docs])
        diff = paired_bootstrap_difference(
            xa, xb, rng=np.random.default_rng(COMPARE_SEED), rounds=COMPARE_ROUNDS
        )
        result = {
            "difference": diff.difference, "se": diff.se, "ci_low": diff.ci_low, "ci_high": diff.ci_high,
            "p_value": diff.p_value, "n": diff.n, "rounds": diff.rounds, "level": diff.level,
            "mean_a": float(xa.mean()), "mean_b": float(xb.mean()),
            "only_a": len(set(values_a) - set(values_b)), "only_b": len(set(values_b) - set(values_a)),
            "a_better": int(np.sum(xa > xb)), "b_better": int(np.sum(xb > xa)),
        }  # fmt: skip
        cache.set(key, result, 3600)
    protocols_differ = any(runs_a[t].config_sha256 != runs_b[t].config_sha256 for t in shared)
    first_a, first_b = runs_a[shared[0]], runs_b[shared[0]]
    return {
        **result,
        "distinguishable": not result["ci_low"] <= 0.0 <= result["ci_high"],
        "metric": metric, "task": task, "tasks": shared, "label": benchmark_label(task) if bench else task,
        "a": first_a.submission, "b": first_b.submission, "run_a": first_a, "run_b": first_b,
        "protocols_differ": protocols_differ,
    }  # fmt: skip


# --- exports ---------------------------------------------------------------------------------------

SCORE_COLUMNS = (
    "submission_id", "model", "run_id", "task", "benchmark", "suite", "suite_version", "metric", "value",
    "stderr", "ci_low", "ci_high", "n", "higher_is_better", "interval", "effective_n", "config_sha256", "updated_at",
)  # fmt: skip


def scores_for_export(viewer=None) -> Iterator[dict]:
    """Every metric of every visible finished run, ordered by run and metric, from a server-side cursor."""
    rows = (
        Score.objects.filter(run__in=runs_visible(viewer))
        .order_by("run_id", "metric")
        .values_list(
            "run__submission__public_id",
            "run__submission__model_name",
            "run_id",
            "run__task",
            "run__suite__name",
            "run__suite__version",
            "metric",
            "value",
            "stderr",
            "ci_low",
            "ci_high",
            "n",
            "higher_is_better",
            "interval",
            "effective_n",
            "run__config_sha256",
            "updated_at",
        )  # fmt: skip
        .iterator(chunk_size=2000)
    )
    for row in rows:
        record = dict(zip(SCORE_COLUMNS[:4] + SCORE_COLUMNS[5:], row, strict=True))
        record["benchmark"] = benchmark_key(record["task"])
        record["updated_at"] = record["updated_at"].isoformat()
        yield {column: record[column] for column in SCORE_COLUMNS}


def samples_for_export(run: EvaluationRun) -> Iterator[str]:
    """A run's records as the engine's ``samples_<task>.jsonl`` lines (``evalcore rescore`` reads them).

    The JSON text comes from PostgreSQL as stored (``payload::text``), never parsed here.
    """
    rows = (
        SampleRecord.objects.filter(run=run)
        .order_by("doc_id")
        .annotate(_text=Cast("payload", TextField()))
        .values_list("_text", flat=True)
        .iterator(chunk_size=_CHUNK)
    )
    yield from rows


def scores_queryset(viewer, *, submission: str | None = None, task: str | None = None, metric: str | None = None,
                    benchmark: str | None = None) -> QuerySet[Score]:  # fmt: skip
    qs = Score.objects.filter(run__in=runs_visible(viewer)).select_related(
        "run", "run__submission", "run__suite"
    )
    if submission is not None:
        qs = qs.filter(run__submission__public_id=submission)
    if task:
        qs = qs.filter(run__task=task)
    if metric:
        qs = qs.filter(metric=metric)
    if benchmark:
        found = [b for b in BENCHMARKS if b.key == benchmark]
        qs = (
            qs.filter(run__task__regex=f"^(?:{found[0].pattern})$")
            if found
            else qs.filter(run__task=benchmark)
        )
    return qs.order_by("run_id", "metric")


def runs_queryset(
    viewer, *, submission: str | None = None, task: str | None = None
) -> QuerySet[EvaluationRun]:
    qs = runs_visible(viewer).select_related("submission", "suite")
    if submission is not None:
        qs = qs.filter(submission__public_id=submission)
    if task:
        qs = qs.filter(task=task)
    return qs.order_by("id")


def samples_queryset(run: EvaluationRun) -> QuerySet[SampleRecord]:
    return SampleRecord.objects.filter(run=run).order_by("doc_id")


def submissions_queryset(
    viewer, *, model_type: str | None = None, search: str | None = None
) -> QuerySet[Submission]:
    """Finished submissions with at least one visible run (the API's list of models)."""
    qs = Submission.objects.filter(
        status=Submission.Status.FINISHED, pk__in=runs_visible(viewer).values("submission_id")
    ).select_related("language_model", "superseded_by")
    if model_type:
        qs = qs.filter(model_type=model_type)
    if search:
        qs = qs.filter(Q(model_name__icontains=search) | Q(base_model__icontains=search))
    return qs.order_by("-created_at", "-id")


__all__ = [
    "COMPARE_ROUNDS", "COMPARE_SEED", "SAMPLES_PER_PAGE", "SCORE_COLUMNS", "compare_runs", "public_runs",
    "run_headline_metric", "run_protocol", "run_visible", "runs_queryset", "runs_visible", "samples_for_export", "samples_page",
    "samples_queryset", "scores_for_export", "scores_queryset", "submissions_queryset",
]  # fmt: skip
