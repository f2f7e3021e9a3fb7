"""Battles held back from publication and the data releases (re-exported by :mod:`arena.models`, where
Django finds them)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from arena.models.battles import Battle
from arena.models.ratings import RatingSnapshot


class BattleHold(models.Model):
    """A battle kept out of publication until staff decide: its prompts were tagged by the moderation step,
    or a voter reported it. Staff release it (published as usual) or keep it held, in the review queue;
    a new report holds a released battle again."""

    class Reason(models.TextChoices):
        MODERATION = "moderation", "Tagged by moderation"
        REPORT = "report", "Reported by a voter"

    class Status(models.TextChoices):
        HELD = "held", "Held: waiting for review"
        RELEASED = "released", "Released: published"
        KEPT = "kept", "Kept held: never published"

    battle = models.OneToOneField(Battle, on_delete=models.CASCADE, related_name="hold")
    reason = models.CharField(max_length=16, choices=Reason.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.HELD)
    details = models.JSONField(default=dict, help_text="moderation: version and score; reports: reason and time")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"], name="battlehold_queue")]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=["held", "released", "kept"]), name="battlehold_status_valid"),
            models.CheckConstraint(condition=Q(reason__in=["moderation", "report"]), name="battlehold_reason_valid"),
        ]

    def __str__(self) -> str:
        return f"hold {self.status} on battle {self.battle_id} ({self.reason})"


class DataRelease(models.Model):
    """A versioned data release (arena/publication/releases.py): Parquet files of published battles (redacted),
    votes and ratings at one snapshot, a dataset card and checksums, in a folder of its own."""

    version = models.CharField(max_length=64, unique=True)
    snapshot = models.ForeignKey(RatingSnapshot, on_delete=models.PROTECT, related_name="releases")
    path = models.CharField(max_length=1000, help_text="The release's folder on the server.")
    files = models.JSONField(default=list, help_text="[{name, bytes, sha256}] of every file in it")
    counts = models.JSONField(default=dict, help_text="battles, votes, ratings rows, held back by reason")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"release {self.version}"

