"""Reward models scored on preference pairs (``python -m evalcore reward``): imported from its --out folder,
or scored by a worker from the admin ("Score a reward model")."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class RewardKind(models.TextChoices):
    CLASSIFIER = "classifier", "sequence classifier"
    DPO = "dpo", "DPO implicit reward"


class RewardStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"
    FAILED = "failed", "failed"


class RewardModelResult(models.Model):
    """One reward model on one set of pairs files: accuracy overall and per category with mid-p
    intervals, the model's identity, the protocol and every pair's rewards (``report``).

    ``pairs_key`` hashes the categories and their files' SHA-256: only results with the same key were
    scored on the same pairs, and the page compares only those. Importing the same name on the same
    pairs again replaces the result.

    A result scored from the admin goes PENDING → RUNNING (``heartbeat_at``, ``worker``) → FINISHED |
    FAILED (``failure_reason``); ``request`` keeps what was asked (checkpoint, kind, reference, pairs file,
    limit, beta). An imported result is FINISHED. Only FINISHED results are shown and downloaded.
    """

    ACTIVE = (RewardStatus.PENDING, RewardStatus.RUNNING)

    name = models.CharField(max_length=100, help_text="The reward model's name on the board.")
    kind = models.CharField(max_length=16, choices=RewardKind.choices)
    pairs_key = models.CharField(max_length=64)
    weights_sha256 = models.CharField(max_length=64, blank=True)
    accuracy = models.FloatField(null=True, blank=True, help_text="Overall accuracy (sorts the table).")
    report = models.JSONField(default=dict, help_text="The recomputed report, protocol and per-pair records.")
    imported_at = models.DateTimeField(auto_now=True)
    status = models.CharField(max_length=16, choices=RewardStatus.choices, default=RewardStatus.FINISHED,
                              db_default=RewardStatus.FINISHED)  # fmt: skip
    failure_reason = models.TextField(blank=True, default="", db_default="")
    request = models.JSONField(default=dict, blank=True, help_text="What the admin asked to score (site runs).")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")  # fmt: skip
    attempts = models.PositiveIntegerField(default=0, db_default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life of its worker.")
    worker = models.CharField(max_length=200, blank=True, default="", db_default="")

    class Meta:
        ordering = ["pairs_key", "-accuracy", "name"]
        constraints = [
            models.UniqueConstraint(fields=["name", "pairs_key"], name="rewardresult_unique_name_pairs"),
            models.CheckConstraint(condition=~Q(name=""), name="rewardresult_name_not_empty"),
            models.CheckConstraint(condition=Q(kind__in=RewardKind.values), name="rewardresult_kind_valid"),
            models.CheckConstraint(condition=Q(status__in=RewardStatus.values), name="rewardresult_status_valid"),
            models.CheckConstraint(
                condition=Q(accuracy__isnull=True) | (Q(accuracy__gte=0) & Q(accuracy__lte=1)),
                name="rewardresult_accuracy_range",
            ),  # fmt: skip
        ]

    def __str__(self) -> str:
        return self.name
