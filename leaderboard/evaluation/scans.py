"""N-gram scans of a corpus for a submission's benchmark items: requested here, run by a worker.

A scan covers the items the current suite evaluates (each task's first ``limit`` documents, the
same ``doc_id``s as the stored per-sample records), so its flagged items join with the samples for
clean-subset scores. The corpus is the owner's declared training data or a path an admin names.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from evalcore.contamination.corpus import corpus_files
from evalcore.contamination.items import task_items
from evalcore.contamination.scan import scan_items
from leaderboard import dispatch
from leaderboard.evaluation.contamination import flag_check, scan_store
from leaderboard.evaluation.suites import suite_current, suite_plan
from leaderboard.models import ContaminationScan, Submission

log = logging.getLogger(__name__)


def training_data_folder(submission_id: int) -> Path:
    """Where the owner's declared training-data files of a submission are kept."""
    return Path(settings.LEADERBOARD_TRAINING_DATA_DIR) / str(submission_id)


def corpus_check(path: str) -> str:
    """An absolute path holding corpus files (``.txt``, ``.jsonl``, either gzipped); ValidationError if not."""
    text = (path or "").strip()
    if not text or "\x00" in text or len(text) > 1000:
        raise ValidationError("Name the corpus: an absolute path of a file or folder, at most 1000 characters.")
    corpus = Path(text)
    if not corpus.is_absolute():
        raise ValidationError(f"The corpus path must be absolute (the worker reads it), got {text!r}.")
    try:
        corpus_files(corpus)
    except (ValueError, OSError) as exc:
        raise ValidationError(f"No corpus to scan at {text}: {exc}") from None
    return str(corpus)


def scan_request(*, submission: Submission, corpus: str, kind: str, requested_by=None,
                 n: int | None = None) -> ContaminationScan:  # fmt: skip
    """Record a PENDING scan of ``corpus`` and send it to a worker once the transaction commits."""
    scan = ContaminationScan(
        submission=submission, kind=kind, corpus=corpus, requested_by=requested_by,
        n=settings.LEADERBOARD_SCAN_NGRAM if n is None else n,
    )  # fmt: skip
    scan.full_clean()
    scan.save()
    dispatch.contamination_scan_send(scan.pk)
    return scan


def _scan_start(scan_id: int) -> ContaminationScan | None:
    with transaction.atomic():
        scan = ContaminationScan.objects.select_for_update().filter(pk=scan_id).first()
        if scan is None or scan.status == ContaminationScan.Status.FINISHED:
            return None
        scan.status = ContaminationScan.Status.RUNNING
        scan.save(update_fields=["status"])
    return scan


def _scan_fail(scan: ContaminationScan, reason: str) -> None:
    scan.status = ContaminationScan.Status.FAILED
    scan.failure_reason = (reason.strip() or "unknown error")[:1000]
    scan.finished_at = timezone.now()
    scan.save(update_fields=["status", "failure_reason", "finished_at"])


def suite_items() -> list:
    """The evaluated items of every task of the current suite (its ``limit`` first documents)."""
    os.environ.setdefault("PODIUM_DATA_DIR", str(settings.PODIUM_DATA_DIR))
    items = []
    for config, entry in suite_plan(suite_current()):
        items.extend(task_items(config, limit=entry["limit"]))
    return items


def scan_execute(scan_id: int) -> str:
    """Run a PENDING (or interrupted) scan and store it; flag the submission past the threshold.

    Bad corpus content (binary lines, huge lines, other encodings, broken gzip) is skipped and
    counted in the report; anything else that stops the scan marks it FAILED with the reason.
    """
    scan = _scan_start(scan_id)
    if scan is None:
        return "nothing to do"
    try:
        result = scan_items(suite_items(), scan.corpus, n=scan.n, max_line_bytes=settings.LEADERBOARD_SCAN_MAX_LINE_BYTES)
    except (ValueError, OSError) as exc:
        log.warning("scan %s failed: %s", scan_id, exc)
        _scan_fail(scan, f"{type(exc).__name__}: {exc}")
        return "failed"
    scan_store(scan, result)
    log.info("scan %s of submission %s: %s", scan_id, scan.submission_id, result.report()["tasks"])
    flag_check(scan.submission_id)
    return "finished"
