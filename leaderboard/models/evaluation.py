"""Frozen suites, evaluation runs, scores, per-document records and score history."""


from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from leaderboard.models.submissions import Submission


class BenchmarkSuite(models.Model):
    """A frozen, versioned list of tasks: ``[{"task", "num_fewshot", "limit"}, ...]``.

    Never edited: a different list is a new version (``leaderboard.evaluation.suites.suite_freeze``).
    """

    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    tasks = models.JSONField()
    tasks_sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="suite_unique_version"),
            models.UniqueConstraint(fields=["name", "tasks_sha256"], name="suite_unique_tasks"),
            models.CheckConstraint(condition=Q(version__gte=1), name="suite_version_positive"),
            models.CheckConstraint(condition=~Q(name=""), name="suite_name_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class RunStatus(models.TextChoices):
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"  # not run, with the reason in ``protocol`` (a log-likelihood task an endpoint cannot score)


class EvaluationRun(models.Model):
    """One task of a suite run on one submission: its results, protocol and code version.

    SKIPPED: the task was not run, ``protocol["skipped"]`` says why (no scores, not on the board).
    """

    Status = RunStatus

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="runs")
    suite = models.ForeignKey(BenchmarkSuite, on_delete=models.PROTECT, related_name="runs")
    task = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    results = models.JSONField(default=dict, blank=True)
    protocol = models.JSONField(default=dict, blank=True)
    config_sha256 = models.CharField(max_length=64, blank=True)
    code_version = models.JSONField(default=dict, blank=True)
    wall_time_s = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["submission", "task"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "suite", "task"], name="run_unique_task"),
            models.CheckConstraint(condition=Q(status__in=RunStatus.values), name="run_status_valid"),
            models.CheckConstraint(
                condition=Q(wall_time_s__isnull=True) | Q(wall_time_s__gte=0),
                name="run_wall_time_not_negative",
            ),  # fmt: skip
        ]

    def __str__(self) -> str:
        return f"{self.task} on {self.submission_id}"


class Score(models.Model):
    """One metric of a run with its standard error and 95% interval."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="scores")
    metric = models.CharField(max_length=200, help_text="metric,filter as the engine names it")
    value = models.FloatField(null=True)
    stderr = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    n = models.PositiveIntegerField()
    higher_is_better = models.BooleanField(default=True)
    interval = models.CharField(
        max_length=32, blank=True,
        help_text="How the interval was computed: a key of evalcore.stats.estimates.METHODS (older runs: wilson, normal).",
    )  # fmt: skip
    effective_n = models.FloatField(
        null=True, blank=True,
        help_text="The size a mid-p interval was taken at (what a benchmark's pooled interval weighs its tasks by).",
    )  # fmt: skip
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "metric"]
        constraints = [
            models.UniqueConstraint(fields=["run", "metric"], name="score_unique_metric"),
            models.CheckConstraint(
                condition=Q(ci_low__isnull=True) | Q(ci_high__isnull=True) | Q(ci_low__lte=F("ci_high")),
                name="score_interval_ordered",
            ),
            models.CheckConstraint(
                condition=Q(stderr__isnull=True) | Q(stderr__gte=0), name="score_stderr_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.metric}={self.value}"


class SampleRecord(models.Model):
    """One evaluated document: prompt, target, raw model outputs, filtered answers, per-doc metrics."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="samples")
    doc_id = models.PositiveIntegerField()
    payload = models.JSONField()

    class Meta:
        ordering = ["run", "doc_id"]
        constraints = [models.UniqueConstraint(fields=["run", "doc_id"], name="sample_unique_doc")]


class ScoreHistory(models.Model):
    """A score's values before it was replaced (a re-score or a re-run)."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="score_history")
    metric = models.CharField(max_length=200)
    value = models.FloatField(null=True)
    stderr = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    n = models.PositiveIntegerField()
    interval = models.CharField(max_length=32, blank=True)
    reason = models.CharField(max_length=300)
    code_version = models.JSONField(default=dict, blank=True)
    replaced_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "metric", "-replaced_at"]
        verbose_name_plural = "score history"

    def __str__(self) -> str:
        return f"{self.metric}={self.value} (replaced {self.replaced_at:%Y-%m-%d})"
