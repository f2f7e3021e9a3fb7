"""Reward models scored on preference pairs (``python -m evalcore reward``), imported from its --out folder."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class RewardKind(models.TextChoices):
    CLASSIFIER = "classifier", "sequence classifier"
    DPO = "dpo", "DPO implicit reward"


class RewardModelResult(models.Model):
    """One reward model on one set of pairs files: accuracy overall and per category with Wilson
    intervals, the model's identity, the protocol and every pair's rewards (``report``).

    ``pairs_key`` hashes the categories and their files' SHA-256: only results with the same key were
    scored on the same pairs, and the page compares only those. Importing the same name on the same
    pairs again replaces the result.
    """

    name = models.CharField(max_length=100, help_text="The reward model's name on the board.")
    kind = models.CharField(max_length=16, choices=RewardKind.choices)
    pairs_key = models.CharField(max_length=64)
    weights_sha256 = models.CharField(max_length=64, blank=True)
    accuracy = models.FloatField(null=True, blank=True, help_text="Overall accuracy (sorts the table).")
    report = models.JSONField(default=dict, help_text="The recomputed report, protocol and per-pair records.")
    imported_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pairs_key", "-accuracy", "name"]
        constraints = [
            models.UniqueConstraint(fields=["name", "pairs_key"], name="rewardresult_unique_name_pairs"),
            models.CheckConstraint(condition=~Q(name=""), name="rewardresult_name_not_empty"),
            models.CheckConstraint(condition=Q(kind__in=RewardKind.values), name="rewardresult_kind_valid"),
            models.CheckConstraint(
                condition=Q(accuracy__isnull=True) | (Q(accuracy__gte=0) & Q(accuracy__lte=1)),
                name="rewardresult_accuracy_range",
            ),  # fmt: skip
        ]

    def __str__(self) -> str:
        return self.name
