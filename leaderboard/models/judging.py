"""Judge configurations, judge runs, answers, judgments, the judgment cache and audits."""


from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from arena.models import LanguageModel


class JudgeRunStatus(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"


class JudgeKind(models.TextChoices):
    PAIRWISE = "pairwise", "pairwise against a baseline"
    SINGLE = "single", "single-answer grading (1-10)"


class ReferenceMode(models.TextChoices):
    GIVEN = "given", "the questions' own reference answers"
    JUDGE = "judge", "the judge writes its own reference first"
    NONE = "none", "no reference"


class JudgeConfig(models.Model):
    """A judge an admin configured: the judge model, its protocol, the baseline and the questions.

    A ``pairwise`` config compares each model's answer with the baseline's; a ``single`` one grades
    each answer alone on the protocol's scale (MT-Bench's 1-10), one grade per turn of two-turn
    questions, reference-guided for the maths, reasoning and coding questions (``reference_mode``).
    The questions are ``instructions`` (strings, or objects with ``turns``, ``category``,
    ``reference``) or a FastChat ``question.jsonl`` under ``PODIUM_DATA_DIR`` (``questions_file``).

    The judge is an arena catalogue model (``judge_model``) or a checkpoint given as ``judge_backend``
    plus ``judge_model_args`` (``path``, ``dtype``). The protocol is a bundled name or YAML text;
    ``protocol_sha256`` and ``instructions_sha256`` are computed on save (see
    :func:`leaderboard.judging.services.judge_config_save`).
    """

    Kind = JudgeKind
    ReferenceMode = ReferenceMode

    name = models.CharField(max_length=100, unique=True)
    judge_model = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                                    help_text="A catalogue model as the judge; or leave empty and give a backend.")  # fmt: skip
    judge_backend = models.CharField(max_length=16, blank=True, help_text="hf, vllm or openai")
    judge_model_args = models.JSONField(default=dict, blank=True, help_text='{"path": "...", "dtype": "float32"}')
    protocol_name = models.CharField(max_length=100, blank=True, help_text="A bundled protocol, e.g. alpacaeval-logprob.")
    protocol_yaml = models.TextField(blank=True, help_text="Or the protocol's YAML text (used when given).")
    protocol_sha256 = models.CharField(max_length=64, blank=True, editable=False)
    kind = models.CharField(max_length=16, choices=JudgeKind.choices, default=JudgeKind.PAIRWISE, editable=False,
                            help_text="The protocol's kind, set when the config is saved.")  # fmt: skip
    baseline = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="+", null=True, blank=True,
                                 help_text="The model every answer is compared with (pairwise protocols only).")  # fmt: skip
    instructions = models.JSONField(default=list, blank=True,
                                    help_text='A list of questions: strings, or {"turns": [..], "category": .., "reference": ..}.')  # fmt: skip
    questions_file = models.CharField(max_length=300, blank=True,
                                      help_text="Or a FastChat question.jsonl under PODIUM_DATA_DIR (e.g. judges/mt_bench/question.jsonl), "
                                                "or 'sample' for the bundled two-turn set.")  # fmt: skip
    references_file = models.CharField(max_length=300, blank=True,
                                       help_text="Optional reference answers for questions_file (FastChat reference_answer/*.jsonl).")  # fmt: skip
    reference_mode = models.CharField(max_length=8, choices=ReferenceMode.choices, default=ReferenceMode.GIVEN,
                                      help_text="Single-answer grading of maths, reasoning and coding questions.")  # fmt: skip
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
            models.CheckConstraint(condition=Q(kind__in=JudgeKind.values), name="judgeconfig_kind_valid"),
            models.CheckConstraint(condition=~Q(kind=JudgeKind.PAIRWISE) | Q(baseline__isnull=False),
                                   name="judgeconfig_pairwise_has_baseline"),  # fmt: skip
            models.CheckConstraint(condition=Q(reference_mode__in=ReferenceMode.values), name="judgeconfig_reference_mode_valid"),
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
    """A model's answer to one turn of one question of a question set (generated once, reused by every
    run); ``turn`` 2 was generated with the model's own turn-1 answer in the conversation."""

    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="judge_answers")
    instructions_sha256 = models.CharField(max_length=64)
    idx = models.PositiveIntegerField()
    turn = models.PositiveSmallIntegerField(default=1)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model", "instructions_sha256", "idx", "turn"]
        constraints = [
            models.UniqueConstraint(fields=["model", "instructions_sha256", "idx", "turn"], name="judgeanswer_unique_turn"),
            models.CheckConstraint(condition=Q(turn__gte=1) & Q(turn__lte=2), name="judgeanswer_turn_range"),
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


class JudgeGrade(models.Model):
    """One grade of a single-answer run: question ``idx``'s ``turn`` graded alone (turn 2 in context).

    ``score`` on the protocol's scale when ``ok``; a failed grade keeps its error and never counts as a
    score. ``reference`` says which reference guided it (``given``, ``judge`` or empty). A log-prob
    grade (the expected rating, no text parsed) keeps ``logprob``: ``scale``, ``probabilities`` (over
    the scale), ``mass`` (probability the judge gave the scale at all) and ``entropy`` (0 certain, 1
    uniform); a parsed grade leaves it empty.
    """

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="grades")
    idx = models.PositiveIntegerField()
    turn = models.PositiveSmallIntegerField(default=1)
    question_id = models.CharField(max_length=200)
    category = models.CharField(max_length=100, blank=True)
    score = models.FloatField(null=True, blank=True)
    ok = models.BooleanField(default=True)
    error = models.CharField(max_length=500, blank=True)
    raw = models.TextField(blank=True)
    reference = models.CharField(max_length=8, blank=True)
    prompt_sha256 = models.CharField(max_length=64)
    protocol_sha256 = models.CharField(max_length=64, blank=True)
    logprob = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "idx", "turn"]
        constraints = [
            models.UniqueConstraint(fields=["run", "idx", "turn"], name="judgegrade_unique_turn"),
            models.CheckConstraint(condition=Q(turn__gte=1) & Q(turn__lte=2), name="judgegrade_turn_range"),
            models.CheckConstraint(condition=Q(ok=True) | ~Q(error=""), name="judgegrade_failure_has_error"),
            models.CheckConstraint(condition=Q(ok=False) | Q(score__isnull=False), name="judgegrade_ok_has_score"),
        ]


class JudgePanel(models.Model):
    """Several judge configs of one kind combined: a panel score per model and each judge's agreement
    with the others (``report``, from :mod:`evalcore.judging.panel`, refreshed when a member's run
    finishes)."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    members = models.ManyToManyField(JudgeConfig, related_name="panels")
    report = models.JSONField(default=dict, blank=True)
    refreshed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.CheckConstraint(condition=~Q(name=""), name="judgepanel_name_not_empty")]

    def __str__(self) -> str:
        return self.name


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
