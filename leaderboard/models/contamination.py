"""Contamination checks of a submission: memorisation probes, declared training data, n-gram scans."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaderboard.models.submissions import Submission


class MemorisationProbe(models.Model):
    """The memorisation probe of one task on a submission: test-split and train-split hit rates.

    ``summary`` is :meth:`evalcore.contamination.ProbeResult.summary` (rates with mid-p intervals, the
    difference's interval built from them, ``newcombe-mid-p``; probes stored before these carry Wilson
    intervals and no ``interval`` key); ``hits`` lists the items the model completed verbatim.
    """

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="probes")
    task = models.CharField(max_length=200)
    limit = models.PositiveIntegerField(help_text="Items probed per split (at most).")
    difference = models.FloatField(help_text="Test hit rate minus train hit rate.")
    diff_ci_low = models.FloatField()
    diff_ci_high = models.FloatField()
    summary = models.JSONField()
    hits = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["submission", "task"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "task"], name="probe_unique_task"),
            models.CheckConstraint(condition=Q(diff_ci_low__lte=models.F("diff_ci_high")), name="probe_interval_ordered"),
        ]

    def __str__(self) -> str:
        return f"probe {self.task} on {self.submission_id}"


class TrainingDataFile(models.Model):
    """A training-data file the owner declared with the submission (scanned for benchmark items)."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="training_files")
    name = models.CharField(max_length=255)
    path = models.CharField(max_length=1000)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["submission", "name"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "name"], name="trainingfile_unique_name"),
            models.CheckConstraint(condition=Q(size__gte=0), name="trainingfile_size_not_negative"),
        ]

    def __str__(self) -> str:
        return self.name


class ScanKind(models.TextChoices):
    DECLARED = "declared", "Declared training data"
    CORPUS = "corpus", "Corpus named by an admin"


class ScanStatus(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"


class ContaminationScan(models.Model):
    """An n-gram scan of a corpus for the submission's benchmark items; ``report`` is the scan's
    report (corpus counts, lines skipped and why, failed files)."""

    Kind = ScanKind
    Status = ScanStatus

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="scans")
    kind = models.CharField(max_length=16, choices=ScanKind.choices)
    corpus = models.CharField(max_length=1000, help_text="The corpus path (declared data: its folder).")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    n = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=16, choices=ScanStatus.choices, default=ScanStatus.PENDING)
    failure_reason = models.CharField(max_length=1000, blank=True)
    report = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["submission", "-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=ScanKind.values), name="scan_kind_valid"),
            models.CheckConstraint(condition=Q(status__in=ScanStatus.values), name="scan_status_valid"),
            models.CheckConstraint(condition=Q(n__gte=8) & Q(n__lte=13), name="scan_n_range"),
            models.CheckConstraint(
                condition=~Q(status=ScanStatus.FAILED) | ~Q(failure_reason=""), name="scan_failure_has_reason"
            ),
        ]

    def __str__(self) -> str:
        return f"scan {self.pk} of {self.submission_id}"


class ScanTaskResult(models.Model):
    """What one scan found for one task: items scanned, the flagged ``doc_id``s and their share."""

    scan = models.ForeignKey(ContaminationScan, on_delete=models.CASCADE, related_name="task_results")
    task = models.CharField(max_length=200)
    items = models.PositiveIntegerField()
    flagged = models.PositiveIntegerField()
    share = models.FloatField()
    flagged_doc_ids = models.JSONField(default=list, blank=True)
    matches = models.JSONField(default=list, blank=True, help_text="[{doc_id, matched_ngrams, ngrams, share}]")

    class Meta:
        ordering = ["scan", "task"]
        constraints = [
            models.UniqueConstraint(fields=["scan", "task"], name="scanresult_unique_task"),
            models.CheckConstraint(condition=Q(flagged__lte=models.F("items")), name="scanresult_flagged_le_items"),
            models.CheckConstraint(condition=Q(share__gte=0) & Q(share__lte=1), name="scanresult_share_range"),
        ]

    def __str__(self) -> str:
        return f"{self.task}: {self.flagged}/{self.items}"
