"""The leaderboard's data: submissions and their review, frozen suites, runs, scores and samples.

A score is a model plus a protocol: every :class:`EvaluationRun` keeps the protocol and code version
that produced it and its per-document :class:`SampleRecord` rows, so scores can be recomputed from
stored outputs (the old values go to :class:`ScoreHistory`). Results are keyed (submission, suite,
task), (run, metric) and (run, doc_id), so a retried evaluation overwrites and never duplicates.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from arena.models import LanguageModel


class ModelType(models.TextChoices):
    PRETRAINED = "pretrained", "Pretrained"
    FINE_TUNED = "fine-tuned", "Fine-tuned"
    CHAT = "chat", "Chat (instruction-tuned)"
    MERGE = "merge", "Merge"


class Precision(models.TextChoices):
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"


class Source(models.TextChoices):
    UPLOAD = "upload", "Uploaded files"
    STORE = "store", "Shared model store"


class SubmissionStatus(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"


class Review(models.TextChoices):
    NONE = "none", "Not reviewed"
    FLAGGED = "flagged", "Flagged for review"
    APPROVED = "approved", "Approved"
    HIDDEN = "hidden", "Hidden"
    REJECTED = "rejected", "Rejected"


NEEDS_BASE_MODEL = (ModelType.FINE_TUNED, ModelType.MERGE)


def new_public_id() -> str:
    """22 URL-safe characters (128 random bits): a submission's public name in URLs, which unlike
    its primary key says nothing about how many submissions exist or which came before it."""
    return secrets.token_urlsafe(16)


class Submission(models.Model):
    """A checkpoint an owner submitted, its validation facts, and where its evaluation stands."""

    ModelType = ModelType
    Precision = Precision
    Source = Source
    Status = SubmissionStatus
    Review = Review
    NEEDS_BASE_MODEL = NEEDS_BASE_MODEL
    ACTIVE = (SubmissionStatus.PENDING, SubmissionStatus.RUNNING)

    public_id = models.CharField(max_length=22, unique=True, default=new_public_id, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="submissions")
    model_name = models.CharField(max_length=200)
    language_model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="submissions")
    model_type = models.CharField(max_length=16, choices=ModelType.choices)
    base_model = models.CharField(max_length=200, blank=True)
    licence = models.CharField(max_length=100)
    precision = models.CharField(max_length=16, choices=Precision.choices, default=Precision.BFLOAT16)
    apply_chat_template = models.BooleanField(default=False)
    private = models.BooleanField(default=False, help_text="Visible only to its owner until published.")
    source = models.CharField(max_length=8, choices=Source.choices)
    architecture = models.CharField(max_length=100)
    weight_sha256 = models.CharField(
        max_length=64, help_text="SHA-256 over the safetensors files' names and bytes, in sorted name order."
    )
    tensors_sha256 = models.CharField(
        max_length=64, blank=True, db_index=True,
        help_text="SHA-256 over the tensors (name, dtype, shape, bytes): the same whatever the files' layout.",
    )  # fmt: skip
    parameter_count = models.BigIntegerField(help_text="Read from the safetensors headers.")
    total_bytes = models.BigIntegerField()
    storage_path = models.CharField(max_length=1000, help_text="The checkpoint folder the worker loads.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    failure_reason = models.CharField(max_length=1000, blank=True)
    log_tail = models.TextField(blank=True)
    progress = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="How many times a worker started it.")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life of its worker.")
    worker = models.CharField(max_length=300, blank=True, help_text="host:pid of the process running it.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    review_state = models.CharField(max_length=16, choices=Review.choices, default=Review.NONE)
    review_reason = models.CharField(max_length=300, blank=True, help_text="Why it was flagged.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "created_at"]), models.Index(fields=["weight_sha256"])]
        constraints = [
            models.CheckConstraint(condition=~Q(model_name=""), name="submission_name_not_empty"),
            models.CheckConstraint(
                condition=Q(status__in=SubmissionStatus.values), name="submission_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(model_type__in=ModelType.values), name="submission_type_valid"
            ),
            models.CheckConstraint(
                condition=Q(precision__in=Precision.values), name="submission_precision_valid"
            ),
            models.CheckConstraint(condition=Q(source__in=Source.values), name="submission_source_valid"),
            models.CheckConstraint(
                condition=Q(review_state__in=Review.values), name="submission_review_valid"
            ),
            models.CheckConstraint(
                condition=~Q(model_type__in=NEEDS_BASE_MODEL) | ~Q(base_model=""),
                name="submission_base_model_when_derived",
            ),
            models.CheckConstraint(
                condition=~Q(status=SubmissionStatus.FAILED) | ~Q(failure_reason=""),
                name="submission_failure_has_reason",
            ),  # fmt: skip
            models.CheckConstraint(condition=Q(parameter_count__gt=0), name="submission_parameters_positive"),
            models.CheckConstraint(condition=Q(total_bytes__gt=0), name="submission_bytes_positive"),
            # One live evaluation per set of weights: a failed one may be submitted again.
            models.UniqueConstraint(
                fields=["weight_sha256"], condition=~Q(status="FAILED"), name="submission_unique_live_weights"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_name} (#{self.pk})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


class ReviewKind(models.TextChoices):
    FLAG = "flag", "Flag"
    APPROVE = "approve", "Approve"
    HIDE = "hide", "Hide"
    REJECT = "reject", "Reject"


class ReviewAction(models.Model):
    """An admin's decision on a submission, with the required comment: the audit log."""

    Action = ReviewKind

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="review_actions")
    admin = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=16, choices=Action.choices)
    comment = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=ReviewKind.values), name="reviewaction_action_valid"
            ),
            models.CheckConstraint(condition=~Q(comment=""), name="reviewaction_comment_required"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.submission_id} by {self.admin_id}"


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


class EvaluationRun(models.Model):
    """One task of a suite run on one submission: its results, protocol and code version."""

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
    interval = models.CharField(max_length=32, blank=True, help_text="How the interval was computed.")
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
    reason = models.CharField(max_length=300)
    code_version = models.JSONField(default=dict, blank=True)
    replaced_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "metric", "-replaced_at"]
        verbose_name_plural = "score history"

    def __str__(self) -> str:
        return f"{self.metric}={self.value} (replaced {self.replaced_at:%Y-%m-%d})"


class JudgeRunStatus(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"


class JudgeConfig(models.Model):
    """A judge an admin configured: the judge model, its protocol, the baseline and the instructions.

    The judge is an arena catalogue model (``judge_model``) or a checkpoint given as ``judge_backend``
    plus ``judge_model_args`` (``path``, ``dtype``). The protocol is a bundled name or YAML text;
    ``protocol_sha256`` and ``instructions_sha256`` are computed on save (see
    :func:`leaderboard.judging.services.judge_config_save`).
    """

    name = models.CharField(max_length=100, unique=True)
    judge_model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                                    help_text="A catalogue model as the judge; or leave empty and give a backend.")  # fmt: skip
    judge_backend = models.CharField(max_length=16, blank=True, help_text="hf, vllm or openai")
    judge_model_args = models.JSONField(default=dict, blank=True, help_text='{"path": "...", "dtype": "float32"}')
    protocol_name = models.CharField(max_length=100, blank=True, help_text="A bundled protocol, e.g. alpacaeval-logprob.")
    protocol_yaml = models.TextField(blank=True, help_text="Or the protocol's YAML text (used when given).")
    protocol_sha256 = models.CharField(max_length=64, blank=True, editable=False)
    baseline = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="+")
    instructions = models.JSONField(default=list, blank=True, help_text="A list of instruction strings.")
    max_new_tokens = models.PositiveIntegerField(default=128, help_text="Answer length limit for every model.",
                                                 validators=[MinValueValidator(1), MaxValueValidator(4096)])
    instructions_sha256 = models.CharField(max_length=64, blank=True, editable=False,
                                           help_text="Over the instructions and max_new_tokens: keys stored answers.")  # fmt: skip
    active = models.BooleanField(default=True, help_text="Judge every submission that finishes its suite.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=~Q(name=""), name="judgeconfig_name_not_empty"),
            models.CheckConstraint(condition=Q(max_new_tokens__gte=1) & Q(max_new_tokens__lte=4096),
                                   name="judgeconfig_max_new_tokens_range"),  # fmt: skip
        ]

    def __str__(self) -> str:
        return self.name


class JudgeRun(models.Model):
    """One model judged under one config: its status (with a worker heartbeat) and its scores.

    ``results``: ``win_rate``, ``standard_error``, ``lc_win_rate``, ``lc_standard_error``, ``lc_ci_low``,
    ``lc_ci_high`` (percent), ``n``, ``failed_pairs``, ``bradley_terry`` (rating, ci_low, ci_high) and
    ``notes``; refreshed whenever another model of the same config is judged (the LC model is fitted
    across all of them).
    """

    Status = JudgeRunStatus
    ACTIVE = (JudgeRunStatus.PENDING, JudgeRunStatus.RUNNING)

    config = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="runs")
    model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="judge_runs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    failure_reason = models.CharField(max_length=1000, blank=True)
    progress = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=300, blank=True)
    judge_key = models.CharField(max_length=200, blank=True, help_text="The judge's weights hash and dtype.")
    protocol_sha256 = models.CharField(max_length=64, blank=True)
    instructions_sha256 = models.CharField(max_length=64, blank=True)
    results = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["config", "-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=JudgeRunStatus.values), name="judgerun_status_valid"),
            models.CheckConstraint(condition=~Q(status=JudgeRunStatus.FAILED) | ~Q(failure_reason=""),
                                   name="judgerun_failure_has_reason"),  # fmt: skip
            # One live run per (config, model): judging again while one waits or runs is a no-op.
            models.UniqueConstraint(fields=["config", "model"], condition=Q(status__in=["PENDING", "RUNNING"]),
                                    name="judgerun_one_live_per_model"),  # fmt: skip
        ]

    def __str__(self) -> str:
        return f"{self.config} on {self.model_id} ({self.status})"


class JudgeAnswer(models.Model):
    """A model's answer to one instruction of an instruction set (generated once, reused by every run)."""

    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="judge_answers")
    instructions_sha256 = models.CharField(max_length=64)
    idx = models.PositiveIntegerField()
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model", "instructions_sha256", "idx"]
        constraints = [
            models.UniqueConstraint(fields=["model", "instructions_sha256", "idx"], name="judgeanswer_unique"),
        ]


class JudgeOrder(models.TextChoices):
    AB = "ab", "baseline first"
    BA = "ba", "model first"


class Judgment(models.Model):
    """One judge call of a run: an instruction in one order (``ab``: the baseline's answer shown first).

    ``p_first`` (log-prob verdicts) or ``verdict`` and ``raw`` (generated ones); a failed judgment keeps
    its error and is never counted as a tie.
    """

    Order = JudgeOrder

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="judgments")
    idx = models.PositiveIntegerField()
    order = models.CharField(max_length=2, choices=Order.choices)
    p_first = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=50, blank=True)
    winner = models.CharField(max_length=4, blank=True)
    weight = models.FloatField(default=1.0)
    raw = models.TextField(blank=True)
    prompt_sha256 = models.CharField(max_length=64)
    ok = models.BooleanField(default=True)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["run", "idx", "order"]
        constraints = [
            models.UniqueConstraint(fields=["run", "idx", "order"], name="judgment_unique_order"),
            models.CheckConstraint(condition=Q(order__in=JudgeOrder.values), name="judgment_order_valid"),
            models.CheckConstraint(condition=Q(p_first__isnull=True) | (Q(p_first__gte=0) & Q(p_first__lte=1)),
                                   name="judgment_p_first_range"),  # fmt: skip
            models.CheckConstraint(condition=Q(ok=True) | ~Q(error=""), name="judgment_failure_has_error"),
        ]


class JudgmentCacheEntry(models.Model):
    """evalcore's judgment cache in the database: key (judge key, protocol sha256, prompt sha256) -> verdict."""

    key = models.CharField(max_length=400, unique=True)
    value = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)


class JudgeAudit(models.Model):
    """An audit of a judge config against labelled pairs (``evalcore.judging.audit_report``)."""

    Status = JudgeRunStatus

    config = models.ForeignKey(JudgeConfig, on_delete=models.CASCADE, related_name="audits")
    pairs_file = models.CharField(max_length=300, help_text="Under PODIUM_DATA_DIR, e.g. judges/llmbar_natural.json")
    limit = models.PositiveIntegerField(default=24, help_text="The first N pairs (keeps the audit cheap).",
                                        validators=[MinValueValidator(1), MaxValueValidator(1000)])
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    failure_reason = models.CharField(max_length=1000, blank=True)
    judge_key = models.CharField(max_length=200, blank=True)
    protocol_sha256 = models.CharField(max_length=64, blank=True)
    report = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["config", "-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=JudgeRunStatus.values), name="judgeaudit_status_valid"),
            models.CheckConstraint(condition=Q(limit__gte=1) & Q(limit__lte=1000), name="judgeaudit_limit_range"),
        ]
