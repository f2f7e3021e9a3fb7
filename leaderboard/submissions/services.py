"""Leaderboard services: create and enqueue submissions, move them through their states, review them.

A submission's checkpoint was fully checked by :class:`leaderboard.forms.SubmissionForm` before it
reaches :func:`submission_create`, which adds the rules that need the database (rate limit, names,
duplicate weights), copies and hashes the files, and only then enqueues the evaluation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from arena.catalogue_services import model_register
from arena.models import LanguageModel
from leaderboard import checkpoint_io, checkpoints
from leaderboard.models import BenchmarkSuite, ReviewAction, Submission

log = logging.getLogger(__name__)
REVIEW_STATE = {
    ReviewAction.Action.FLAG: Submission.Review.FLAGGED,
    ReviewAction.Action.APPROVE: Submission.Review.APPROVED,
    ReviewAction.Action.HIDE: Submission.Review.HIDDEN,
    ReviewAction.Action.REJECT: Submission.Review.REJECTED,
}


def _rate_limit_check(owner) -> None:
    since = timezone.now() - timedelta(days=7)
    recent = Submission.objects.filter(owner=owner, created_at__gte=since).count()
    limit = settings.LEADERBOARD_SUBMISSIONS_PER_WEEK
    if recent >= limit:
        raise ValidationError(f"You have made {recent} submissions in the last 7 days; the limit is {limit} a week.")


def _name_check(owner, name: str) -> None:
    """A name belongs to the first owner who submitted it; arena models' names are taken."""
    model = LanguageModel.objects.filter(name=name).first()
    if model is None:
        return
    if not Submission.objects.filter(language_model=model, owner=owner).exists():
        raise ValidationError(f"The name {name!r} is already taken; choose another.")


def variant_review_reason(owner, base_model: str, *, exclude_id: int | None = None) -> str:
    """Why a public entry must wait for review: its family (owner, base model) has more than
    ``LEADERBOARD_PRIVATE_VARIANTS_LIMIT`` private variants evaluated (the best of many looks
    better than it is); "" when it need not wait."""
    base = base_model.strip()
    if not base:
        return ""
    limit = settings.LEADERBOARD_PRIVATE_VARIANTS_LIMIT
    private = (
        Submission.objects.filter(owner=owner, base_model__iexact=base, private=True, status=Submission.Status.FINISHED)
        .exclude(pk=exclude_id)
        .count()
    )
    if private <= limit:
        return ""
    return f"{private} private variants of {base} evaluated (more than {limit}): best-of-K inflation"


def _duplicate_message(existing: Submission, owner) -> str:
    if existing.private and existing.owner_id != owner.pk:
        return "These weights were already submitted (as a private variant of another account)."
    url = reverse("leaderboard:submission", args=[existing.pk])
    return format_html(
        'These weights were already submitted as {} ({}): <a href="{}">see its results</a>.',
        existing.model_name, existing.get_status_display(), url,
    )  # fmt: skip


def _duplicate_check(owner, weight_sha256: str, tensors_sha256: str = "") -> None:
    """Refuse weights already submitted: the same files, or the same tensors in other files."""
    same = Q(weight_sha256=weight_sha256)
    if tensors_sha256:
        same |= Q(tensors_sha256=tensors_sha256)
    existing = Submission.objects.filter(same).exclude(status=Submission.Status.FAILED).order_by("pk").first()
    if existing is not None:
        raise ValidationError(_duplicate_message(existing, owner), code="duplicate")


def submission_create(*, owner, data: dict, files: list[checkpoints.CheckpointFile],
                      report: checkpoints.CheckpointReport, store_folder: Path | None = None) -> Submission:  # fmt: skip
    """Store a checked checkpoint as a PENDING submission and enqueue its evaluation.

    ``data`` is a SubmissionForm's cleaned data. Uploaded files are copied (and hashed on the way)
    into ``LEADERBOARD_SUBMISSIONS_DIR/<id>/``; a store folder is hashed where it lies. Raises
    ValidationError (rate limit, name taken, duplicate weights) with nothing stored.
    """
    if not report.ok:
        raise ValidationError(report.errors)
    name = data["model_name"].strip()
    _rate_limit_check(owner)
    _name_check(owner, name)
    staging = final = None
    if store_folder is None:
        staging = Path(settings.LEADERBOARD_SUBMISSIONS_DIR) / ".incoming" / uuid.uuid4().hex
    try:
        try:
            if staging is not None:
                staging.parent.mkdir(parents=True, exist_ok=True)
                weight_sha256 = checkpoint_io.copy_and_hash(files, staging)
            else:
                weight_sha256 = checkpoint_io.hash_weights(files)
            _duplicate_check(owner, weight_sha256)  # before reading everything once more
            folder = staging if staging is not None else Path(store_folder)
            weights = [folder / f.name for f in files if f.name.lower().endswith(checkpoints.SAFETENSORS)]
            tensors_sha256 = checkpoint_io.tensors_hash(weights)
        except OSError as exc:  # a full disk, a file gone from the store
            log.exception("storing a checkpoint of %s failed", owner.pk)
            raise ValidationError(f"The checkpoint could not be read and stored ({exc.strerror or exc}).") from exc
        _duplicate_check(owner, weight_sha256, tensors_sha256)
        with transaction.atomic():
            # Two uploads of one owner at the same moment: the second waits here, then counts the first.
            get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
            _rate_limit_check(owner)
            submission = Submission(
                owner=owner,
                model_name=name,
                language_model=model_register(name=name, family=data.get("base_model") or ""),
                model_type=data["model_type"],
                base_model=data.get("base_model") or "",
                licence=data["licence"].strip(),
                precision=data["precision"],
                apply_chat_template=bool(data.get("apply_chat_template")),
                private=bool(data.get("private")),
                source=Submission.Source.UPLOAD if store_folder is None else Submission.Source.STORE,
                architecture=report.architecture,
                weight_sha256=weight_sha256,
                tensors_sha256=tensors_sha256,
                parameter_count=report.parameter_count,
                total_bytes=report.total_bytes,
                storage_path=str(store_folder or staging),
            )
            if not submission.private:
                submission.review_reason = variant_review_reason(owner, submission.base_model)
                if submission.review_reason:
                    submission.review_state = Submission.Review.FLAGGED
            submission.full_clean()
            try:
                with transaction.atomic():
                    submission.save()
            except IntegrityError:  # the same weights submitted at the same moment
                _duplicate_check(owner, weight_sha256)
                raise
            if staging is not None:
                final = Path(settings.LEADERBOARD_SUBMISSIONS_DIR) / str(submission.pk)
                checkpoint_io.remove_tree(final)  # left by a crash before a rolled-back insert (SQLite reuses ids)
                staging.rename(final)
                submission.storage_path = str(final)
                submission.save(update_fields=["storage_path"])
            submission_enqueue(submission)
    except BaseException:
        for folder in (staging, final):
            if folder is not None:
                checkpoint_io.remove_tree(folder)
        raise
    log.info("submission %s created: %s (%s parameters)", submission.pk, name, report.parameter_count)
    return submission


def submission_enqueue(submission: Submission) -> None:
    """Send ``submission_evaluate`` to the ``evaluate`` queue once the current transaction commits."""
    from leaderboard.tasks import submission_evaluate

    submission_id = submission.pk
    transaction.on_commit(lambda: submission_evaluate.delay(submission_id))


def submission_requeue(submission: Submission) -> Submission:
    """Send a FAILED submission back to PENDING and enqueue it again (admin action)."""
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        if locked.status != Submission.Status.FAILED:
            raise ValidationError(f"Only failed submissions can be requeued; this one is {locked.status}.")
        locked.status = Submission.Status.PENDING
        locked.failure_reason = ""
        locked.progress = {}
        locked.full_clean()
        locked.save()
        submission_enqueue(locked)
    return locked


def submission_publish(*, submission_id: int, owner) -> Submission:
    """Make an owner's private variant public (it then shows on the board, subject to review)."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().filter(pk=submission_id, owner=owner).first()
        if submission is None:
            raise Submission.DoesNotExist(f"no submission {submission_id} of this owner")
        if submission.private:
            submission.private = False
            reason = variant_review_reason(owner, submission.base_model, exclude_id=submission.pk)
            if reason and submission.review_state == Submission.Review.NONE:
                submission.review_state, submission.review_reason = Submission.Review.FLAGGED, reason
            submission.save(update_fields=["private", "review_state", "review_reason"])
    return submission


class SubmissionBusy(Exception):
    """Another worker ran this submission moments ago (a duplicate delivery): try again later."""


def submission_start(submission_id: int) -> Submission | None:
    """PENDING (or RUNNING again, after a worker died) → RUNNING; None when there is nothing to do.

    A RUNNING submission whose worker showed a sign of life within ``LEADERBOARD_HEARTBEAT_STALE_S``
    is still being evaluated (the broker handed the task out twice, e.g. past Redis's visibility
    timeout): raises SubmissionBusy rather than running it twice at once.
    """
    now = timezone.now()
    with transaction.atomic():
        submission = Submission.objects.select_for_update().filter(pk=submission_id).first()
        if submission is None or submission.status not in Submission.ACTIVE:
            return None
        stale = timedelta(seconds=settings.LEADERBOARD_HEARTBEAT_STALE_S)
        fresh = submission.heartbeat_at is not None and now - submission.heartbeat_at < stale
        if submission.status == Submission.Status.RUNNING and fresh:
            if not worker_gone(submission.worker):
                raise SubmissionBusy(f"submission {submission_id} is running on another worker")
            log.info("submission %s: its worker %s is gone; taking over", submission_id, submission.worker)
        submission.status = Submission.Status.RUNNING
        submission.started_at = submission.started_at or now
        submission.heartbeat_at = now
        submission.worker = worker_identity()
        submission.attempts += 1
        submission.save(update_fields=["status", "started_at", "heartbeat_at", "worker", "attempts"])
    return submission


def worker_identity() -> str:
    """``host:pid`` of this process, recorded on the submission it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


def worker_gone(worker: str) -> bool:
    """Whether ``worker`` (``host:pid``) was a process on this machine that no longer exists.

    Lets a restarted worker (``make demo`` after Ctrl-C) resume at once instead of waiting out the
    heartbeat. Another machine's worker, this very process, or anything unreadable counts as alive:
    the heartbeat decides for those.
    """
    host, _, pid = (worker or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) in (0, os.getpid()):
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False


def submission_progress(submission_id: int, progress: dict) -> None:
    """Store progress; it is also the worker's heartbeat."""
    Submission.objects.filter(pk=submission_id).update(progress=progress, heartbeat_at=timezone.now())


def submission_finish(submission_id: int, *, log_tail: str = "") -> None:
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission_id)
        submission.status = Submission.Status.FINISHED
        submission.finished_at = timezone.now()
        submission.failure_reason = ""
        submission.log_tail = log_tail[-8000:]
        submission.save(update_fields=["status", "finished_at", "failure_reason", "log_tail"])


def submission_fail(submission_id: int, *, reason: str, log_tail: str = "") -> None:
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission_id)
        submission.status = Submission.Status.FAILED
        submission.finished_at = timezone.now()
        submission.failure_reason = (reason.strip() or "unknown error")[:1000]
        submission.log_tail = log_tail[-8000:]
        submission.save(update_fields=["status", "finished_at", "failure_reason", "log_tail"])


def submission_review(*, submission: Submission, admin, action: str, comment: str) -> ReviewAction:
    """Record an admin's decision (with its required comment) and set the submission's review state."""
    if not getattr(admin, "is_staff", False):
        raise ValidationError("Only staff can review submissions.")
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        entry = ReviewAction(submission=locked, admin=admin, action=action, comment=(comment or "").strip())
        entry.full_clean()
        entry.save()
        locked.review_state = REVIEW_STATE[ReviewAction.Action(action)]
        locked.save(update_fields=["review_state"])
    return entry


def _suite_tasks_clean(tasks: list[dict]) -> list[dict]:
    if not isinstance(tasks, list) or not tasks:
        raise ValidationError("A suite needs a non-empty list of tasks.")
    cleaned, seen = [], set()
    for entry in tasks:
        if not isinstance(entry, dict) or not isinstance(entry.get("task"), str) or not entry["task"]:
            raise ValidationError("Each suite entry needs a task name.")
        unknown = set(entry) - {"task", "num_fewshot", "limit"}
        if unknown:
            raise ValidationError(f"Suite entry {entry['task']!r} has unknown keys {sorted(unknown)}.")
        for key in ("num_fewshot", "limit"):
            value = entry.get(key)
            if value is not None and (type(value) is not int or value < (0 if key == "num_fewshot" else 1)):
                raise ValidationError(f"Suite entry {entry['task']!r}: {key} must be a whole number.")
        if entry["task"] in seen:
            raise ValidationError(f"Task {entry['task']!r} is in the suite twice.")
        seen.add(entry["task"])
        cleaned.append({"task": entry["task"], "num_fewshot": entry.get("num_fewshot"), "limit": entry.get("limit")})
    return cleaned


def suite_freeze(*, name: str, tasks: list[dict]) -> BenchmarkSuite:
    """The suite ``name`` with exactly these tasks: the existing version, or the next version."""
    cleaned = _suite_tasks_clean(tasks)
    digest = hashlib.sha256(json.dumps(cleaned, sort_keys=True).encode()).hexdigest()
    existing = BenchmarkSuite.objects.filter(name=name, tasks_sha256=digest).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            latest = BenchmarkSuite.objects.select_for_update().filter(name=name).order_by("-version").first()
            suite = BenchmarkSuite(
                name=name, version=(latest.version + 1) if latest else 1, tasks=cleaned, tasks_sha256=digest
            )
            suite.full_clean()
            suite.save()
            return suite
    except (IntegrityError, ValidationError):  # frozen concurrently by another process
        existing = BenchmarkSuite.objects.filter(name=name, tasks_sha256=digest).first()
        if existing is None:
            raise
        return existing


def suite_current() -> BenchmarkSuite:
    """The leaderboard suite as configured now (``LEADERBOARD_SUITE_NAME`` / ``LEADERBOARD_SUITE_TASKS``)."""
    return suite_freeze(name=settings.LEADERBOARD_SUITE_NAME, tasks=settings.LEADERBOARD_SUITE_TASKS)
