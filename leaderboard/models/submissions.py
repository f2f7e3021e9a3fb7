"""Submissions, their review and its audit log."""


from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

from arena.models import BattleHold, LanguageModel, Vote, VoterFlag
from common.urls import addresses_withheld


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
    ENDPOINT = "endpoint", "Arena model's endpoint"


ENDPOINT = Source.ENDPOINT
# An endpoint evaluation has no files: no weights hash, no folder, no byte count (and the parameter
# count and precision only where the catalogue knows them). Uploads and store folders keep every fact.
_NO_FILES = Q(
    source=ENDPOINT, weight_sha256="", tensors_sha256="", storage_path="", total_bytes__isnull=True
) & ~Q(endpoint={})
_FILES = (
    ~Q(source=ENDPOINT) & ~Q(weight_sha256="") & ~Q(storage_path="")
    & Q(total_bytes__isnull=False, parameter_count__isnull=False) & Q(endpoint={})
)  # fmt: skip


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
    its primary key says nothing about how many submissions exist or which came before it. Never
    starting with "-" or "_", so that it can be given on a command line as it is (an id beginning with
    "-" was read as an option by ``manage.py contamination_scan``)."""
    while True:
        candidate = secrets.token_urlsafe(16)
        if candidate[0].isalnum():
            return candidate


class Submission(models.Model):
    """A checkpoint an owner submitted, its validation facts, and where its evaluation stands.

    Or (``source`` ``endpoint``) an arena model evaluated through the endpoint that serves it, requested
    by staff from the admin: no files, so no weights hash, folder or byte count; ``endpoint`` holds the
    backend and arguments it was run with, frozen when it was requested (keys are only named, never held).
    Staff may re-run a finished one: a new submission, which on finishing sets the old one's
    ``superseded_by`` (its scores leave the board row; its runs and protocols stay recorded).
    """

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
    open_weights = models.BooleanField(
        default=False, help_text="The owner's word: anyone may download the weights (the catalogue shows it)."
    )
    precision = models.CharField(
        max_length=16, choices=Precision.choices, default=Precision.BFLOAT16, blank=True,
        help_text="Empty only for an endpoint evaluation (the server's precision is not known).",
    )  # fmt: skip
    apply_chat_template = models.BooleanField(default=False)
    private = models.BooleanField(default=False, help_text="Visible only to its owner until published.")
    source = models.CharField(max_length=8, choices=Source.choices)
    architecture = models.CharField(max_length=100, blank=True)
    weight_sha256 = models.CharField(
        max_length=64, blank=True,
        help_text="SHA-256 over the safetensors files' names and bytes, in sorted name order (empty: an endpoint).",
    )  # fmt: skip
    tensors_sha256 = models.CharField(
        max_length=64, blank=True, db_index=True,
        help_text="SHA-256 over each tensor's name, dtype, shape and SHA-256 of its bytes: the same whatever the files' layout.",
    )  # fmt: skip
    parameter_count = models.BigIntegerField(
        null=True, blank=True, help_text="Read from the safetensors headers (an endpoint: the catalogue's, where known)."
    )
    total_bytes = models.BigIntegerField(null=True, blank=True)
    storage_path = models.CharField(
        max_length=1000, blank=True, help_text="The checkpoint folder the worker loads (empty: an endpoint)."
    )
    endpoint = models.JSONField(
        default=dict, blank=True,
        help_text='An endpoint evaluation\'s {"backend", "args"}, frozen when requested (no secrets: keys by api_key_env).',
    )  # fmt: skip
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    failure_reason = models.CharField(max_length=1000, blank=True)
    log_tail = models.TextField(blank=True)
    progress = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="How many times a worker started it.")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life of its worker.")
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When its evaluation reached the broker; empty: sent again by the outbox."
    )
    worker = models.CharField(max_length=300, blank=True, help_text="host:pid of the process running it.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    owner_notified_at = models.DateTimeField(
        null=True, blank=True, help_text="When the owner was mailed the outcome (one mail per finish or failure)."
    )
    review_state = models.CharField(max_length=16, choices=Review.choices, default=Review.NONE)
    review_reason = models.CharField(max_length=300, blank=True, help_text="Why it was flagged.")
    superseded_by = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="supersedes",
        help_text="An endpoint evaluation re-run since: the later run's scores replaced these on the board "
        "(this one stays recorded, with its runs and protocols).",
    )  # fmt: skip

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
                condition=Q(precision__in=Precision.values) | Q(source=ENDPOINT, precision=""),
                name="submission_precision_valid",
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
            models.CheckConstraint(
                condition=Q(parameter_count__isnull=True) | Q(parameter_count__gt=0), name="submission_parameters_positive"
            ),
            models.CheckConstraint(
                condition=Q(total_bytes__isnull=True) | Q(total_bytes__gt=0), name="submission_bytes_positive"
            ),
            models.CheckConstraint(condition=_FILES | _NO_FILES, name="submission_files_unless_endpoint"),
            # One live evaluation per set of weights: a failed one may be submitted again.
            models.UniqueConstraint(
                fields=["weight_sha256"], condition=~Q(status="FAILED") & ~Q(source=ENDPOINT),
                name="submission_unique_live_weights",
            ),
            # One live endpoint evaluation per arena model (a second click while one is queued adds none) ...
            models.UniqueConstraint(
                fields=["language_model"], condition=Q(source=ENDPOINT, status__in=["PENDING", "RUNNING"]),
                name="submission_one_live_endpoint_run",
            ),
            # ... and one current finished one (its scores on the board); a re-run supersedes it as it finishes.
            models.UniqueConstraint(
                fields=["language_model"], condition=Q(source=ENDPOINT, status="FINISHED", superseded_by__isnull=True),
                name="submission_one_current_endpoint_run",
            ),
            models.CheckConstraint(
                condition=Q(superseded_by__isnull=True) | Q(source=ENDPOINT, status="FINISHED"),
                name="submission_superseded_only_finished_endpoint",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_name} (#{self.pk})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def is_endpoint(self) -> bool:
        return self.source == Source.ENDPOINT

    def endpoint_withheld(self, value, viewer):
        """``value`` (protocol, reason, progress: text or JSON) as ``viewer`` may read it: staff see the
        endpoint's address (credential-stripped), everyone else that an endpoint was used, not where
        (it can name internal hosts): each mention of its host reads "(address withheld)"."""
        if not self.is_endpoint or getattr(viewer, "is_staff", False):
            return value
        url = (self.endpoint or {}).get("args", {}).get("base_url")
        return addresses_withheld(value, [url] if isinstance(url, str) else [])


class ReviewKind(models.TextChoices):
    FLAG = "flag", "Flag"
    APPROVE = "approve", "Approve"
    HIDE = "hide", "Hide"
    REJECT = "reject", "Reject"
    CONFIRM = "confirm", "Confirm (votes excluded)"
    DISMISS = "dismiss", "Dismiss"
    EXCLUDE = "exclude", "Keep excluded"
    RESTORE = "restore", "Restore (count the vote)"
    RELEASE = "release", "Release (publish)"
    KEEP = "keep", "Keep held (never publish)"


class ReviewTarget(models.TextChoices):
    SUBMISSION = "submission", "Submission"
    VOTER = "voter", "Flagged voter"
    IDENTITY = "identity", "Identity-revealing answer"
    BATTLE = "battle", "Held battle"


# Which actions apply to which kind of item, and which target column each kind fills.
REVIEW_ACTIONS = {
    ReviewTarget.SUBMISSION: (ReviewKind.FLAG, ReviewKind.APPROVE, ReviewKind.HIDE, ReviewKind.REJECT),
    ReviewTarget.VOTER: (ReviewKind.CONFIRM, ReviewKind.DISMISS),
    ReviewTarget.IDENTITY: (ReviewKind.EXCLUDE, ReviewKind.RESTORE),
    ReviewTarget.BATTLE: (ReviewKind.RELEASE, ReviewKind.KEEP),
}
_TARGET_FIELD = {ReviewTarget.SUBMISSION: "submission", ReviewTarget.VOTER: "voter_flag", ReviewTarget.IDENTITY: "vote",
                 ReviewTarget.BATTLE: "battle_hold"}  # fmt: skip


def _target_matches() -> Q:
    condition = Q()
    for kind, actions in REVIEW_ACTIONS.items():
        own = Q(kind=kind, action__in=[a.value for a in actions], **{f"{_TARGET_FIELD[kind]}__isnull": False})
        for other, field in _TARGET_FIELD.items():
            if other != kind:
                own &= Q(**{f"{field}__isnull": True})
        condition |= own
    return condition


class ReviewAction(models.Model):
    """The audit log of the one review queue: a decision, with the required comment, on a submission, a
    flagged voter or an identity-revealing vote (``kind`` says which; exactly one target).

    ``admin`` is empty only for a flag the system raised itself (a contamination check past its
    threshold): the log shows "system" as who.
    """

    Action = ReviewKind
    Target = ReviewTarget

    kind = models.CharField(max_length=16, choices=ReviewTarget.choices, default=ReviewTarget.SUBMISSION)
    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="review_actions", null=True, blank=True
    )
    voter_flag = models.ForeignKey(
        VoterFlag, on_delete=models.PROTECT, related_name="review_actions", null=True, blank=True
    )
    vote = models.ForeignKey(Vote, on_delete=models.PROTECT, related_name="review_actions", null=True, blank=True)
    battle_hold = models.ForeignKey(
        BattleHold, on_delete=models.PROTECT, related_name="review_actions", null=True, blank=True
    )
    admin = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="Empty: raised by the system (a contamination check).",
    )  # fmt: skip
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
            models.CheckConstraint(condition=_target_matches(), name="reviewaction_one_target_of_its_kind"),
            models.CheckConstraint(
                condition=Q(admin__isnull=False) | Q(action=ReviewKind.FLAG), name="reviewaction_system_only_flags"
            ),
        ]

    def __str__(self) -> str:
        target = self.submission_id or self.voter_flag_id or self.vote_id or self.battle_hold_id
        return f"{self.action} {self.kind} {target} by {self.admin_id or 'system'}"
