"""Contamination checks of a submission: the memorisation probe run with its evaluation, n-gram scan
results stored per task, and the thresholds past which the system flags it for review.

The checks themselves are :mod:`evalcore.contamination`; this module stores what they found and
applies ``LEADERBOARD_PROBE_FLAG_DIFF_LOW`` and ``LEADERBOARD_SCAN_FLAG_SHARE`` (docs/contamination.md).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evalcore.contamination.probe import ProbeResult, probe_task
from evalcore.contamination.scan import ScanResult
from leaderboard.evaluation.score_store import json_safe
from leaderboard.models import ContaminationScan, MemorisationProbe, ScanTaskResult, Submission
from leaderboard.review.services import submission_flag_system

log = logging.getLogger(__name__)
PROBE_WORDS = 8
PROBE_MAX_GEN_TOKS = 32


def probe_pending(submission: Submission, plan: list) -> list:
    """Task configs of ``plan`` that have a training split and no stored probe yet (none when the
    probe is off, ``LEADERBOARD_PROBE_LIMIT = 0``)."""
    if settings.LEADERBOARD_PROBE_LIMIT <= 0:
        return []
    done = set(MemorisationProbe.objects.filter(submission=submission).values_list("task", flat=True))
    return [config for config, _entry in plan if config.get("training_split") and config.task not in done]


def probe_run(submission: Submission, config, backend) -> MemorisationProbe:
    """Probe ``config``'s first ``LEADERBOARD_PROBE_LIMIT`` test and train items and store the result."""
    limit = settings.LEADERBOARD_PROBE_LIMIT
    result = probe_task(backend, config, limit=limit, words=PROBE_WORDS, max_gen_toks=PROBE_MAX_GEN_TOKS)
    log.info("memorisation probe %s: test %d/%d, train %d/%d, difference %+.3f [%.3f, %.3f]", config.task,
             result.test.hits, result.test.n, result.train.hits, result.train.n, result.difference,
             result.diff_ci_low, result.diff_ci_high)  # fmt: skip
    return probe_store(submission, result, limit=limit)


def probe_store(submission: Submission, result: ProbeResult, *, limit: int) -> MemorisationProbe:
    """Store (or overwrite) a task's probe result; the items it completed verbatim are kept."""
    hits = [
        {"split": r.split, "doc_id": r.doc_id, "prompt": r.prompt[-300:], "expected": r.expected, "generated": r.generated[:300]}
        for r in result.records
        if r.hit
    ]
    probe, _ = MemorisationProbe.objects.update_or_create(
        submission=submission, task=result.task,
        defaults={"limit": limit, "difference": result.difference, "diff_ci_low": result.diff_ci_low,
                  "diff_ci_high": result.diff_ci_high, "summary": json_safe(result.summary()), "hits": hits},
    )  # fmt: skip
    return probe


def scan_store(scan: ContaminationScan, result: ScanResult) -> ContaminationScan:
    """Store a finished scan: its report and, per task, the flagged ``doc_id``s and their share."""
    with transaction.atomic():
        locked = ContaminationScan.objects.select_for_update().get(pk=scan.pk)
        for task, summary in result.tasks.items():
            matches = [m.as_dict() for m in result.flagged if m.task == task]
            ScanTaskResult.objects.update_or_create(
                scan=locked, task=task,
                defaults={"items": summary.items, "flagged": summary.flagged, "share": summary.share,
                          "flagged_doc_ids": [m["doc_id"] for m in matches], "matches": matches},
            )  # fmt: skip
        ScanTaskResult.objects.filter(scan=locked).exclude(task__in=list(result.tasks)).delete()
        locked.report = json_safe(result.report())
        locked.status = ContaminationScan.Status.FINISHED
        locked.failure_reason = ""
        locked.finished_at = timezone.now()
        locked.save(update_fields=["report", "status", "failure_reason", "finished_at"])
    return locked


def flag_reasons(submission: Submission) -> list[str]:
    """Why the stored checks put ``submission`` past a threshold (empty: not past any)."""
    reasons = []
    bound = settings.LEADERBOARD_PROBE_FLAG_DIFF_LOW
    for probe in MemorisationProbe.objects.filter(submission=submission, diff_ci_low__gt=bound).order_by("task"):
        test, train = probe.summary.get("test", {}), probe.summary.get("train", {})
        reasons.append(
            f"contamination: memorisation probe on {probe.task}: test {test.get('hits')}/{test.get('n')} vs train "
            f"{train.get('hits')}/{train.get('n')} completed verbatim, difference {probe.difference:+.3f} "
            f"[{probe.diff_ci_low:+.3f}, {probe.diff_ci_high:+.3f}], lower bound above {bound:+.3f}"
        )
    share = settings.LEADERBOARD_SCAN_FLAG_SHARE
    found = ScanTaskResult.objects.filter(
        scan__submission=submission, scan__status=ContaminationScan.Status.FINISHED, share__gt=share
    ).select_related("scan")
    for row in found.order_by("scan_id", "task"):
        reasons.append(
            f"contamination: n-gram scan {row.scan_id} ({row.scan.get_kind_display().lower()}) found {row.flagged} "
            f"of {row.items} {row.task} items ({row.share:.1%}, above {share:.1%})"
        )
    return reasons


def flag_check(submission_id: int) -> list[str]:
    """Flag the submission for review (as "system") for every threshold it is past; the reasons."""
    submission = Submission.objects.get(pk=submission_id)
    reasons = flag_reasons(submission)
    for reason in reasons:
        if submission_flag_system(submission_id=submission_id, reason=reason) is not None:
            log.warning("submission %s flagged for review: %s", submission_id, reason)
    return reasons
