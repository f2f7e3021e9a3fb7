"""Submission services: create and enqueue submissions, requeue failed ones, publish private variants.
An arena model's evaluation through its endpoint (staff, from the admin) is in
:mod:`leaderboard.submissions.endpoint`.

A submission's checkpoint was fully checked by :class:`leaderboard.submissions.forms.SubmissionForm`
before it reaches :func:`submission_create`, which adds the rules that need the database (rate
limit, names, duplicate weights), copies and hashes the files, and only then enqueues the evaluation.
"""

from __future__ import annotations

import hashlib
import logging
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

from arena.catalogue.services import model_register
from arena.models import LanguageModel
from leaderboard import dispatch
from leaderboard.evaluation.scans import scan_request, training_data_folder
from leaderboard.models import ContaminationScan, Submission, SubmissionDraft, TrainingDataFile
from leaderboard.submissions import checkpoint_io, checkpoints, chunks

log = logging.getLogger(__name__)


def checkpoint_limits() -> checkpoints.Limits:
    return checkpoints.Limits(
        max_parameters=settings.LEADERBOARD_MAX_PARAMETERS,
        max_bytes=settings.LEADERBOARD_MAX_UPLOAD_BYTES,
        max_files=settings.LEADERBOARD_MAX_FILES,
        architectures=tuple(settings.LEADERBOARD_ARCHITECTURES),
    )


def _rate_limit_check(owner) -> None:
    since = timezone.now() - timedelta(days=7)
    recent = (  # staff's endpoint evaluations of arena models are not uploads
        Submission.objects.filter(owner=owner, created_at__gte=since).exclude(source=Submission.Source.ENDPOINT).count()
    )
    limit = settings.LEADERBOARD_SUBMISSIONS_PER_WEEK
    if recent >= limit:
        raise ValidationError(f"You have made {recent} submissions in the last 7 days; the limit is {limit} a week.")


def rules_check(owner, name: str) -> None:
    """The rules that need the database and not the files: weekly limit, name free (checked again on submit)."""
    _rate_limit_check(owner)
    _name_check(owner, name.strip())


NAME_POLICY = (
    "A model name is one model on the board: it belongs to the first owner who submitted it, and it names "
    "one submission or upload at a time. While a submission of that name is pending, running or finished, "
    "or its files are still arriving, the name is refused, to its owner too; a failed evaluation or a "
    "refused or expired upload frees it. Give a new version its own name (e.g. add -v2)."
)


def _name_check(owner, name: str, *, draft_public_id: str = "") -> None:
    """:data:`NAME_POLICY`: arena models' and other owners' names are taken; a name in use by a live
    submission or an open upload (other than ``draft_public_id``, the one being finalized) is refused."""
    model = LanguageModel.objects.filter(name=name).first()
    if model is not None and not Submission.objects.filter(language_model=model, owner=owner).exists():
        raise ValidationError(f"The name {name!r} is already taken; choose another.")
    live = Submission.objects.filter(model_name=name).exclude(status=Submission.Status.FAILED).first()
    if live is not None:
        raise ValidationError(
            f"You already have a submission named {name!r} ({live.get_status_display().lower()}): a name is one "
            "model on the board. Give a new version its own name (e.g. add -v2).", code="name_in_use",
        )  # fmt: skip
    uploading = (
        SubmissionDraft.objects.filter(metadata__model_name=name, owner=owner, expires_at__gte=timezone.now(),
                                       state__in=[SubmissionDraft.State.UPLOADING, SubmissionDraft.State.FINALIZING])
        .exclude(public_id=draft_public_id)
        .exists()
    )  # fmt: skip
    if uploading:
        raise ValidationError(
            f"The files of another submission named {name!r} are still arriving: finish or cancel that upload "
            "(or let it expire), or give this one another name.", code="name_in_use",
        )  # fmt: skip


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
    """The owner's own entry is named and linked; anyone else's is not described at all, so the
    refusal never tells whether another account holds the weights, or whether privately."""
    if existing.owner_id != owner.pk:
        return "These weights were already submitted to Podium; each set of weights is evaluated once."
    url = reverse("leaderboard:submission", args=[existing.public_id])
    return format_html(
        'You already submitted these weights as {} ({}): <a href="{}">see it</a>.',
        existing.model_name, existing.get_status_display(), url,
    )  # fmt: skip


def own_duplicate(owner, weight_sha256: str) -> Submission | None:
    """The owner's own earlier submission of these weights (not a failed one), or None: the check a client
    may ask for before it uploads, by the digest it computed. Other accounts' submissions are not
    consulted, so a digest alone never tells whether someone else submitted those weights; their
    duplicates are refused when the bytes arrive (:func:`duplicate_check`)."""
    return (
        Submission.objects.filter(owner=owner, weight_sha256=weight_sha256)
        .exclude(status=Submission.Status.FAILED)
        .order_by("pk")
        .first()
    )


def own_duplicate_message(existing: Submission) -> str:
    return (
        f"You already submitted these weights as {existing.model_name} ({existing.get_status_display()}); "
        "each set of weights is evaluated once, and nothing was uploaded."
    )


def duplicate_check(owner, weight_sha256: str, tensors_sha256: str = "") -> None:
    """Refuse weights already submitted: the same files, or the same tensors in other files."""
    same = Q(weight_sha256=weight_sha256)
    if tensors_sha256:
        same |= Q(tensors_sha256=tensors_sha256)
    existing = Submission.objects.filter(same).exclude(status=Submission.Status.FAILED).order_by("pk").first()
    if existing is not None:
        raise ValidationError(_duplicate_message(existing, owner), code="duplicate")


def _checkpoint_store(owner, files: list[checkpoints.CheckpointFile], *, staging: Path | None,
                      store_folder: Path | None, weight_sha256: str = "", tensors_sha256: str = "") -> tuple[str, str]:  # fmt: skip
    """Copy uploaded files into ``staging`` (or read a store folder where it lies) and hash them:
    (digest of the weight files, digest of the tensors). Refuses files already submitted.
    ``weight_sha256`` (and ``tensors_sha256``) given: the files are already in ``staging`` (a
    resumable upload hashed them while they arrived)."""
    try:
        if not weight_sha256 and staging is not None:
            staging.parent.mkdir(parents=True, exist_ok=True)
            weight_sha256 = checkpoint_io.copy_and_hash(files, staging)
        elif not weight_sha256:
            weight_sha256 = checkpoint_io.hash_weights(files)
        duplicate_check(owner, weight_sha256)  # before reading everything once more
        folder = staging if staging is not None else Path(store_folder)
        weights = [folder / f.name for f in files if f.name.lower().endswith(checkpoints.SAFETENSORS)]
        return weight_sha256, tensors_sha256 or checkpoint_io.tensors_hash(weights)
    except OSError as exc:  # a full disk, a file gone from the store
        log.exception("storing a checkpoint of %s failed", owner.pk)
        raise ValidationError(f"The checkpoint could not be read and stored ({exc.strerror or exc}).") from exc


def _review_flag(submission: Submission) -> None:
    """Flag a public entry whose family has too many private variants (it waits for review)."""
    if not submission.private:
        submission.review_reason = variant_review_reason(submission.owner, submission.base_model)
        if submission.review_reason:
            submission.review_state = Submission.Review.FLAGGED


def _training_data_store(submission: Submission, uploads: list) -> Path | None:
    """Copy the declared training-data files beside the submission, record them, and request their scan.

    Returns the folder (to remove if the submission is not stored after all), or None without files.
    """
    if not uploads:
        return None
    folder = training_data_folder(submission.pk)
    checkpoint_io.remove_tree(folder)  # left by a crash before a rolled-back insert
    folder.mkdir(parents=True)
    for upload in uploads:
        digest = hashlib.sha256()
        size = 0
        with open(folder / upload.name, "xb") as out:
            for chunk in upload.chunks():
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        TrainingDataFile.objects.create(submission=submission, name=upload.name, path=str(folder / upload.name),
                                        size=size, sha256=digest.hexdigest())  # fmt: skip
    scan_request(submission=submission, corpus=str(folder), kind=ContaminationScan.Kind.DECLARED)
    return folder


def submission_create(*, owner, data: dict, files: list[checkpoints.CheckpointFile],
                      report: checkpoints.CheckpointReport, store_folder: Path | None = None,
                      received: tuple[Path, str, str] | None = None, public_id: str = "") -> Submission:  # fmt: skip
    """Store a checked checkpoint as a PENDING submission and enqueue its evaluation.

    ``data`` is a SubmissionForm's cleaned data. Uploaded files are copied (and hashed on the way)
    into ``LEADERBOARD_SUBMISSIONS_DIR/<id>/``; a store folder is hashed where it lies; files
    ``received`` by a resumable upload, (their folder, weights digest, tensors digest or ""), are moved there.
    Raises ValidationError (rate limit, name taken, duplicate weights) with nothing stored (the
    received folder is left to its caller).
    """
    if not report.ok:
        raise ValidationError(report.errors)
    name = data["model_name"].strip()
    _rate_limit_check(owner)
    _name_check(owner, name, draft_public_id=public_id)
    staging = final = training = None
    if received is not None:
        staging = received[0]
    elif store_folder is None:
        staging = Path(settings.LEADERBOARD_SUBMISSIONS_DIR) / ".incoming" / uuid.uuid4().hex
    try:
        weight_sha256, tensors_sha256 = _checkpoint_store(
            owner, files, staging=staging, store_folder=store_folder,
            weight_sha256=received[1] if received else "", tensors_sha256=received[2] if received else "",
        )  # fmt: skip
        duplicate_check(owner, weight_sha256, tensors_sha256)
        with transaction.atomic():
            # Two uploads of one owner at the same moment: the second waits here, then counts the first.
            get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
            _rate_limit_check(owner)
            _name_check(owner, name, draft_public_id=public_id)  # under the owner's lock: no two at once
            submission = Submission(
                owner=owner,
                model_name=name,
                language_model=model_register(
                    name=name, family=data.get("base_model") or "", licence=data["licence"].strip(),
                    open_weights=bool(data.get("open_weights")),
                ),
                model_type=data["model_type"],
                base_model=data.get("base_model") or "",
                licence=data["licence"].strip(),
                open_weights=bool(data.get("open_weights")),
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
            if public_id:
                submission.public_id = public_id
            _review_flag(submission)
            submission.full_clean()
            try:
                with transaction.atomic():
                    submission.save()
            except IntegrityError:  # the same weights submitted at the same moment
                duplicate_check(owner, weight_sha256)
                raise
            if staging is not None:
                final = Path(settings.LEADERBOARD_SUBMISSIONS_DIR) / str(submission.pk)
                final.parent.mkdir(parents=True, exist_ok=True)
                checkpoint_io.remove_tree(final)  # left by a crash before a rolled-back insert (SQLite reuses ids)
                staging.rename(final)
                if received is not None and settings.LEADERBOARD_UPLOAD_FSYNC:
                    chunks.sync_folder(final.parent)  # the received chunks are on disk: so is their new name
                submission.storage_path = str(final)
                submission.save(update_fields=["storage_path"])
            training = training_data_folder(submission.pk)
            _training_data_store(submission, data.get("training_data") or [])
            submission_enqueue(submission)
    except BaseException:
        if received is not None and final is not None and final.exists():
            final.rename(staging)  # back to its caller, who decides what to keep
        for folder in ((staging, final) if received is None else ()) + (training,):
            if folder is not None:
                checkpoint_io.remove_tree(folder)
        raise
    log.info("submission %s created: %s (%s parameters)", submission.pk, name, report.parameter_count)
    return submission


def submission_enqueue(submission: Submission) -> None:
    """Send ``submission_evaluate`` to the ``evaluate`` queue once the current transaction commits, and
    record that the broker took it (``dispatched_at``). Not sent (the broker is down): the submission
    stays PENDING with no ``dispatched_at``, and :func:`submissions_dispatch_pending` sends it later."""
    pk = submission.pk

    def sent() -> None:
        Submission.objects.filter(pk=pk).update(dispatched_at=timezone.now())

    dispatch.submission_evaluate_send(pk, on_sent=sent)


def submissions_dispatch_pending(*, grace_s: float, limit: int = 200) -> int:
    """The outbox: send every PENDING submission the broker never took (``dispatched_at`` empty, stored
    more than ``grace_s`` ago so a web process still sending is not raced). Returns how many were sent.
    A second copy of a message is harmless: the evaluation task runs a submission once."""
    cutoff = timezone.now() - timedelta(seconds=grace_s)
    waiting = Submission.objects.filter(status=Submission.Status.PENDING, dispatched_at__isnull=True, created_at__lte=cutoff)
    sent = 0
    for submission in waiting.order_by("created_at", "pk")[:limit]:
        submission_enqueue(submission)  # outside a transaction: sent at once
        sent += Submission.objects.filter(pk=submission.pk, dispatched_at__isnull=False).exists()
    if sent:
        log.info("outbox: %s pending submissions sent to the broker", sent)
    return sent


def submission_requeue(submission: Submission) -> Submission:
    """Send a FAILED submission back to PENDING and enqueue it again (admin action)."""
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        if locked.status != Submission.Status.FAILED:
            raise ValidationError(f"Only failed submissions can be requeued; this one is {locked.status}.")
        later = locked.is_endpoint and Submission.objects.filter(
            language_model_id=locked.language_model_id, source=Submission.Source.ENDPOINT,
            status=Submission.Status.FINISHED, pk__gt=locked.pk,
        ).exists()  # fmt: skip
        if later:  # it would resume an old attempt over the newer scores
            raise ValidationError("A later evaluation of this model through its endpoint finished since: "
                                  "re-run it from the model (Admin › Language models) instead.")  # fmt: skip
        locked.status = Submission.Status.PENDING
        locked.failure_reason = ""
        locked.progress = {}
        locked.dispatched_at = None
        locked.owner_notified_at = None  # the next outcome is news again
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
