"""Resumable uploads of a submission's files (tus), and personal API tokens.

A :class:`SubmissionDraft` is a submission whose metadata is checked and whose files are still
arriving: it declares every file (name and size) up front, each :class:`DraftFile` records how many
bytes the server holds (the tus offset), and the draft carries one running SHA-256 over the weight
files in sorted name order (``weights_state``, resumable in any web process) so the weights are
hashed while they arrive. When every file is complete the draft becomes a :class:`Submission` with
the same public id.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaderboard.models.submissions import Submission, new_public_id


class DraftState(models.TextChoices):
    UPLOADING = "UPLOADING"
    FINALIZING = "FINALIZING"
    SUBMITTED = "SUBMITTED"
    REFUSED = "REFUSED"
    EXPIRED = "EXPIRED"


class SubmissionDraft(models.Model):
    State = DraftState

    public_id = models.CharField(max_length=22, unique=True, default=new_public_id, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submission_drafts")
    metadata = models.JSONField(help_text="The submission form's cleaned fields (name, type, licence, ...).")
    files = models.JSONField(help_text="Declared files: {name: size in bytes}.")
    state = models.CharField(max_length=16, choices=DraftState.choices, default=DraftState.UPLOADING)
    errors = models.JSONField(default=list, blank=True, help_text="Why it was refused, sentence by sentence.")
    weights_state = models.BinaryField(help_text="Running SHA-256 (OpenSSL SHA256_CTX bytes) over the weights.")
    weights_file = models.CharField(max_length=200, blank=True, help_text="The weight file the hash has reached.")
    weights_offset = models.BigIntegerField(default=0, help_text="How far into weights_file the hash has reached.")
    submission = models.OneToOneField(Submission, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(help_text="Bytes are removed after this, unless more arrive.")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(state__in=DraftState.values), name="draft_state_valid"),
            models.CheckConstraint(condition=Q(weights_offset__gte=0), name="draft_weights_offset_valid"),
        ]

    def __str__(self) -> str:
        return f"draft {self.public_id} ({self.state})"


class DraftFile(models.Model):
    """One file of a draft being received: ``offset`` bytes of ``length`` are on disk."""

    public_id = models.CharField(max_length=22, unique=True, default=new_public_id, editable=False)
    draft = models.ForeignKey(SubmissionDraft, on_delete=models.CASCADE, related_name="uploads")
    name = models.CharField(max_length=200)
    length = models.BigIntegerField()
    offset = models.BigIntegerField(default=0)
    header_checked = models.BooleanField(default=False, help_text="Safetensors header read and accepted.")
    tensors = models.JSONField(default=list, blank=True, help_text="[start, end, name, dtype, shape] from the header.")
    tensor_position = models.BigIntegerField(default=0, help_text="How far the per-tensor digests have read.")
    tensor_state = models.BinaryField(default=b"", blank=True, help_text="Running SHA-256 of the tensor being read.")
    tensor_digests = models.JSONField(default=dict, blank=True, help_text="{tensor name: SHA-256 of its bytes}.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["draft", "name"], name="draftfile_unique_name"),
            models.CheckConstraint(condition=Q(offset__gte=0) & Q(offset__lte=models.F("length")),
                                   name="draftfile_offset_within_length"),  # fmt: skip
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.offset}/{self.length})"

    @property
    def complete(self) -> bool:
        return self.offset == self.length


class ApiToken(models.Model):
    """A personal API token: only its SHA-256 is stored; ``prefix`` (its first characters) is shown."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=~Q(name=""), name="apitoken_name_not_empty")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"
