"""Battles and their turns: two anonymous models answering the same conversation (re-exported by
:mod:`arena.models`, where Django finds them).

Names of the models in a battle never leave the server before its vote: battles are addressed by a
random ``public_id`` and the voter only ever sees "Model A" and "Model B".
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q

from arena.models.catalogue import LanguageModel


class Battle(models.Model):
    """Two anonymous models answering the same conversation. ``model_a`` is shown on the left."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        VOTED = "voted"
        FAILED = "failed"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    model_a = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="+")
    model_b = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    excluded_reason = models.CharField(max_length=64, blank=True, help_text="Why its vote is not rated.")
    session_hash = models.CharField(max_length=64, db_index=True)
    ip_hash = models.CharField(max_length=64, db_index=True)
    consent_version = models.CharField(max_length=40, blank=True, help_text="The arena terms the voter agreed to.")
    consent_at = models.DateTimeField(null=True, blank=True, help_text="When the voter agreed to them.")
    # The moderation step's verdict on the prompts ({"version", "score", "flagged"}): a voted battle is
    # published only once moderated, and never while held (BattleHold). arena/publication/moderation.py.
    moderation = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(model_a=F("model_b")), name="battle_models_differ"),
        ]

    def __str__(self) -> str:
        return f"battle {self.public_id}"


class Turn(models.Model):
    """One user message and both models' answers to it (with the history before it)."""

    class SideStatus(models.TextChoices):
        PENDING = "pending"
        STREAMING = "streaming"
        DONE = "done"
        ERROR = "error"

    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveSmallIntegerField()
    prompt = models.TextField()
    answer_a = models.TextField(blank=True)
    answer_b = models.TextField(blank=True)
    status_a = models.CharField(max_length=16, choices=SideStatus.choices, default=SideStatus.PENDING)
    status_b = models.CharField(max_length=16, choices=SideStatus.choices, default=SideStatus.PENDING)
    error_a = models.CharField(max_length=300, blank=True)
    error_b = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_a = models.DateTimeField(null=True, blank=True)
    finished_b = models.DateTimeField(null=True, blank=True)
    # The answer stopped at the model's max_new_tokens (the backend said so: evalcore.models.base.ChatStream);
    # the page marks it "(cut at the token limit)" once the side is done.
    cut_a = models.BooleanField(default=False, db_default=False)
    cut_b = models.BooleanField(default=False, db_default=False)
    # What the public sees of this turn: prompt and answers with personal data and secrets replaced
    # (arena/publication/redaction.py), with the redactor's version; recomputed when that changes.
    redacted = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["battle", "index"]
        constraints = [models.UniqueConstraint(fields=["battle", "index"], name="turn_unique_index")]
        # The reaper's scan (arena.play.generation.turns_reap_stale): only turns still answering.
        indexes = [
            models.Index(
                fields=["created_at"],
                name="turn_live_created",
                condition=Q(status_a__in=["pending", "streaming"]) | Q(status_b__in=["pending", "streaming"]),
            )
        ]

    def side_done(self, side: str) -> bool:
        return getattr(self, f"status_{side}") in (self.SideStatus.DONE, self.SideStatus.ERROR)
