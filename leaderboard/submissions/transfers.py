"""Resumable uploads (tus): drafts, their files, chunks, and the step from a draft to a submission.

A draft declares its files; each file is created, receives chunks at the offset the server holds,
and may be terminated. The weights are hashed as they arrive: the draft keeps one running SHA-256
over the weight files in sorted name order (the digest ``checkpoint_io.hash_weights`` makes) with
its state in the database, so any web process can continue it. A chunk at the hash's frontier is
hashed while it is written; bytes that arrive ahead of the frontier (a later shard sent in
parallel) are read back once when the frontier reaches them. Both digests run on a second thread
beside the one receiving the chunk (``chunks.receive``). See docs/uploads.md.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.db.models import F
from django.utils import timezone

from common.resumable_hash import ResumableSha256
from leaderboard.models import DraftFile, DraftState, SubmissionDraft
from leaderboard.submissions import checkpoint_io, checkpoints, chunks, services

log = logging.getLogger(__name__)
ChunkError = chunks.ChunkError


class Refused(ValueError):
    """The whole draft was refused (its bytes removed); the messages say why."""

    def __init__(self, messages: list[str]):
        super().__init__(" ".join(messages))
        self.messages = messages


def draft_folder(draft: SubmissionDraft) -> Path:
    return Path(settings.LEADERBOARD_UPLOADS_DIR) / draft.public_id


def _expiry():
    return timezone.now() + timedelta(seconds=settings.LEADERBOARD_UPLOAD_EXPIRE_S)


def draft_create(*, owner, metadata: dict, files: dict) -> SubmissionDraft:
    """A draft for a submission whose ``metadata`` (a SubmissionMetadataForm's cleaned data) is
    checked; ``files`` {name: size} are judged by name and size now, by content as they arrive."""
    errors = chunks.declared_problems(files, services.checkpoint_limits())
    if errors:
        raise ValidationError({"files": errors})
    services.rules_check(owner, metadata["model_name"])
    open_drafts = SubmissionDraft.objects.filter(owner=owner, state=DraftState.UPLOADING, expires_at__gte=timezone.now())
    limit = settings.LEADERBOARD_UPLOADS_IN_PROGRESS
    if open_drafts.count() >= limit:  # each may grow to LEADERBOARD_MAX_UPLOAD_BYTES on the server's disk
        raise ValidationError(f"You have {limit} submissions whose files are still arriving; finish one "
                              "(or let it expire) before starting another.")  # fmt: skip
    first = chunks.weight_names(files)[0]
    weights = ResumableSha256()
    weights.update(first.encode() + b"\0")
    draft = SubmissionDraft.objects.create(
        owner=owner, metadata=metadata, files=files, weights_state=weights.state(), weights_file=first,
        expires_at=_expiry(),
    )  # fmt: skip
    draft_folder(draft).mkdir(parents=True, exist_ok=True)
    if settings.LEADERBOARD_UPLOAD_FSYNC:
        chunks.sync_folder(draft_folder(draft).parent)
    return draft


def upload_create(*, owner, draft_id: str, name: str, length: int) -> DraftFile:
    """Start receiving file ``name`` of a draft; its declared size and ``length`` must agree."""
    draft = SubmissionDraft.objects.filter(public_id=draft_id, owner=owner).first()
    if draft is None:
        raise ChunkError(f"No submission {draft_id[:30]!r} of yours is waiting for files.", 404)
    draft_check_open(draft)
    if name not in draft.files:
        raise ChunkError(f"{name[:200]!r} is not one of the files this submission declared.", 400)
    if draft.files[name] != length:
        raise ChunkError(
            f"{name} was declared as {draft.files[name]} bytes but Upload-Length says {length}.", 400
        )
    try:
        with transaction.atomic():
            upload = DraftFile.objects.create(draft=draft, name=name, length=length)
    except DatabaseError:
        raise ChunkError(f"{name} is already being uploaded: resume it (HEAD its URL) or DELETE it first.", 409) from None
    (draft_folder(draft) / name).touch()
    if settings.LEADERBOARD_UPLOAD_FSYNC:
        chunks.sync_folder(draft_folder(draft))
    return upload


def draft_check_open(draft: SubmissionDraft) -> None:
    if draft.state == DraftState.REFUSED:
        raise ChunkError("This submission was refused: " + " ".join(draft.errors), 410)
    if draft.state == DraftState.EXPIRED or draft.expires_at < timezone.now():
        raise ChunkError("This upload expired and its bytes were removed; start a new submission.", 410)
    if draft.state != DraftState.UPLOADING:
        raise ChunkError("All files of this submission were received; it takes no more bytes.", 410)


def upload_for_owner(owner, upload_id: str) -> DraftFile:
    upload = DraftFile.objects.select_related("draft").filter(public_id=upload_id, draft__owner=owner).first()
    if upload is None:
        raise ChunkError("No such upload (it may have been terminated or expired).", 404)
    return upload


def chunk_receive(*, owner, upload_id: str, offset: int, length: int, checksum_header: str | None,
                  stream: BinaryIO) -> DraftFile:  # fmt: skip
    """Receive one chunk (tus PATCH). Raises ChunkError (nothing kept) or Refused (the draft refused).

    When this chunk completes the draft's last file, the draft becomes a submission here.
    """
    checksum = chunks.parse_checksum(checksum_header)
    try:
        with transaction.atomic():
            upload = _chunk_write(owner, upload_id, offset, length, checksum, stream)
    except Refused as refusal:
        draft_refuse(upload_for_owner(owner, upload_id).draft_id, refusal.messages)
        raise
    if not upload.draft.uploads.exclude(offset=F("length")).exists():
        upload.draft = draft_finalize(upload.draft_id)
    return upload


def _chunk_write(owner, upload_id, offset, length, checksum, stream) -> DraftFile:
    try:
        # of=("self",): lock this file's row only (the draft row is locked briefly, below, by every chunk)
        upload = DraftFile.objects.select_for_update(nowait=True, of=("self",)).select_related("draft").get(
            public_id=upload_id, draft__owner=owner
        )
    except DraftFile.DoesNotExist:
        raise ChunkError("No such upload (it may have been terminated or expired).", 404) from None
    except DatabaseError:
        raise ChunkError("Another request is writing this upload right now; retry after it.", 423) from None
    draft_check_open(upload.draft)
    if offset != upload.offset:
        raise ChunkError(f"Upload-Offset is {offset} but the server holds {upload.offset} bytes of {upload.name}: "
                         "send the chunk that starts there (HEAD tells the offset).", 409)  # fmt: skip
    if offset + length > upload.length:
        raise ChunkError(f"The chunk would end at byte {offset + length}, past the {upload.length} bytes "
                         f"declared for {upload.name}.", 413)  # fmt: skip
    draft = upload.draft
    hasher = digester = None
    if draft.weights_file == upload.name and draft.weights_offset == offset:
        hasher = ResumableSha256.from_state(bytes(draft.weights_state))
    if upload.tensors and upload.tensor_position == offset:
        digester = checkpoint_io.TensorDigester(upload.tensors, position=offset, state=bytes(upload.tensor_state),
                                                digests=upload.tensor_digests)  # fmt: skip

    path = draft_folder(draft) / upload.name
    consumers = [h for h in (hasher and hasher.update, digester and digester.feed) if h]  # see each block as written
    chunks.receive(stream, path, offset=offset, length=length, checksum=checksum, consumers=consumers,
                   durable=settings.LEADERBOARD_UPLOAD_FSYNC,  # on disk before the offset is committed
                   direct=settings.LEADERBOARD_UPLOAD_DIRECT_IO)
    try:
        upload.offset = offset + length
        _tensors_advance(upload, path, digester)
        upload.save(update_fields=["offset", "header_checked", "tensors", "tensor_position", "tensor_state",
                                   "tensor_digests", "updated_at"])  # fmt: skip
        draft = SubmissionDraft.objects.select_for_update().get(pk=draft.pk)
        draft_check_open(draft)  # refused or expired while this chunk arrived
        if hasher is not None and draft.weights_file == upload.name and draft.weights_offset == offset:
            draft.weights_state, draft.weights_offset = hasher.state(), upload.offset
        _weights_catch_up(draft)
        draft.expires_at = _expiry()
        draft.save(update_fields=["weights_state", "weights_file", "weights_offset", "expires_at"])
    except BaseException:
        with open(path, "r+b") as target:
            target.truncate(offset)
        raise
    upload.draft = draft
    return upload


def _tensors_advance(upload: DraftFile, path: Path, digester) -> None:
    """A weight file: check its header once it is here, then keep each tensor's digest up to the
    bytes received (those that arrived with the header are read back once, a chunk at most)."""
    if not upload.name.lower().endswith(checkpoints.SAFETENSORS):
        return
    if not upload.header_checked:
        try:
            table = chunks.check_safetensors_start(path, received=upload.offset, size=upload.length, name=upload.name)
        except checkpoints.CheckpointError as exc:
            raise Refused([str(exc)]) from None
        if table is None:
            return
        upload.header_checked, upload.tensors = True, table
    if digester is None:
        digester = checkpoint_io.TensorDigester(upload.tensors, position=upload.tensor_position,
                                                state=bytes(upload.tensor_state), digests=upload.tensor_digests)  # fmt: skip
    _feed_from_disk(path, digester.position, upload.offset, digester.feed)
    upload.tensor_position, upload.tensor_state, upload.tensor_digests = digester.position, digester.state(), digester.digests


def _feed_from_disk(path: Path, start: int, end: int, feed) -> None:
    with open(path, "rb") as stream:
        stream.seek(start)
        while start < end:
            block = stream.read(min(chunks.BLOCK * 8, end - start))
            if not block:
                raise OSError(f"{path.name} is shorter than the offset the server recorded")
            feed(block)
            start += len(block)


def _weights_catch_up(draft: SubmissionDraft) -> None:
    """Move the weights hash over bytes that are on disk but not yet hashed (a shard that arrived
    before the ones sorted ahead of it), and on to the next shard when one is complete."""
    names = chunks.weight_names(draft.files)
    offsets = {u.name: (u.offset, u.length) for u in draft.uploads.all()}
    hasher = None
    while draft.weights_file and draft.weights_file in offsets:
        held, length = offsets[draft.weights_file]
        if draft.weights_offset < held:
            hasher = hasher or ResumableSha256.from_state(bytes(draft.weights_state))
            _feed_from_disk(draft_folder(draft) / draft.weights_file, draft.weights_offset, held, hasher.update)
            draft.weights_offset = held
        if held < length:
            break
        hasher = hasher or ResumableSha256.from_state(bytes(draft.weights_state))
        position = names.index(draft.weights_file) + 1
        draft.weights_file = names[position] if position < len(names) else ""
        draft.weights_offset = 0
        if draft.weights_file:
            hasher.update(draft.weights_file.encode() + b"\0")
    if hasher is not None:
        draft.weights_state = hasher.state()


def upload_terminate(*, owner, upload_id: str) -> None:
    """tus DELETE: the file's bytes are removed; if the weights hash had read them, it restarts
    from the first shard (reading back what is still on disk)."""
    with transaction.atomic():
        upload = upload_for_owner(owner, upload_id)
        _lock_files(DraftFile.objects.filter(pk=upload.pk))  # locks are taken files first, then the draft
        draft = SubmissionDraft.objects.select_for_update().get(pk=upload.draft_id)
        if draft.state != DraftState.UPLOADING:
            raise ChunkError("This submission takes no more changes.", 410)
        upload.delete()
        chunks.remove(draft_folder(draft) / upload.name)
        names = chunks.weight_names(draft.files)
        if upload.name in names and (not draft.weights_file or upload.name <= draft.weights_file):
            weights = ResumableSha256()
            weights.update(names[0].encode() + b"\0")
            draft.weights_state, draft.weights_file, draft.weights_offset = weights.state(), names[0], 0
            _weights_catch_up(draft)
            draft.save(update_fields=["weights_state", "weights_file", "weights_offset"])


def _lock_files(files) -> None:
    """Lock file rows, or ChunkError 423 when a chunk is arriving for one of them. Every writer
    locks the files first and the draft second (as a chunk does), so none of them can deadlock."""
    try:
        list(files.select_for_update(nowait=True).values_list("pk", flat=True))
    except DatabaseError:
        raise ChunkError("A chunk of this upload is arriving right now; retry after it.", 423) from None


def draft_refuse(draft_pk: int, messages: list[str]) -> None:
    """Refuse a draft: its reasons are kept, every byte it received is removed (after the chunks
    in flight for its other files finish: they then find it refused)."""
    with transaction.atomic():
        list(DraftFile.objects.filter(draft_id=draft_pk).select_for_update().values_list("pk", flat=True))
        draft = SubmissionDraft.objects.select_for_update().get(pk=draft_pk)
        draft.state, draft.errors = DraftState.REFUSED, messages
        draft.save(update_fields=["state", "errors"])
        draft.uploads.all().delete()
    checkpoint_io.remove_tree(draft_folder(draft))
    log.info("draft %s refused: %s", draft.public_id, " ".join(messages)[:300])


def draft_finalize(draft_pk: int) -> SubmissionDraft:
    """All files are here: check the checkpoint as the form does and create the submission.

    Checked again under the draft's lock, every declared file with an upload and every upload
    complete: a chunk's request decides to call this with one query after its commit, and another
    request may create the last file's upload (0 bytes yet) between that query and this lock.
    Counting uploads alone then took the new, empty file for a whole one, and the checks refused a
    correct checkpoint ("it ends inside its header length"; seen from the browser, which creates
    the weights' upload while the small files' chunks arrive)."""
    with transaction.atomic():
        draft = SubmissionDraft.objects.select_for_update().get(pk=draft_pk)
        if (
            draft.state != DraftState.UPLOADING
            or draft.uploads.count() != len(draft.files)
            or draft.uploads.exclude(offset=F("length")).exists()
        ):
            return draft
        draft.state = DraftState.FINALIZING
        draft.save(update_fields=["state"])
    folder = draft_folder(draft)
    files = [checkpoints.CheckpointFile(n, s, lambda p=folder / n: open(p, "rb")) for n, s in draft.files.items()]
    report = checkpoints.inspect_checkpoint(
        files, limits=services.checkpoint_limits(), want_chat_template=bool(draft.metadata.get("apply_chat_template"))
    )
    if not report.ok:
        draft_refuse(draft.pk, report.errors)
        raise Refused(report.errors)
    if draft.weights_file:  # the frontier stopped short: cannot happen once every file is complete
        log.warning("draft %s: weights hash incomplete at finalize, hashing again", draft.public_id)
        weight_sha256 = checkpoint_io.hash_weights(files)
    else:
        weight_sha256 = ResumableSha256.from_state(bytes(draft.weights_state)).hexdigest()
    try:
        submission = services.submission_create(
            owner=draft.owner, data=draft.metadata, files=files, report=report,
            received=(folder, weight_sha256, _tensors_sha256(draft)), public_id=draft.public_id,
        )  # fmt: skip
    except ValidationError as exc:
        draft_refuse(draft.pk, exc.messages)
        raise Refused(exc.messages) from None
    SubmissionDraft.objects.filter(pk=draft.pk).update(state=DraftState.SUBMITTED, submission=submission)
    draft.uploads.all().delete()
    draft.state, draft.submission = DraftState.SUBMITTED, submission
    return draft


def _tensors_sha256(draft: SubmissionDraft) -> str:
    """The tensors digest from the per-tensor digests made while the bytes arrived ("" if any is
    missing: the submission then reads the weights once more to make it)."""
    weights = set(chunks.weight_names(draft.files))
    entries = []
    for upload in draft.uploads.filter(name__in=weights):
        digester = checkpoint_io.TensorDigester(upload.tensors, position=upload.tensor_position,
                                                digests=upload.tensor_digests)  # fmt: skip
        if not upload.tensors or not digester.complete:
            return ""
        entries.extend(digester.entries())
    return checkpoint_io.tensors_digest(entries)


def uploads_expire(now=None) -> int:
    """Remove the bytes of drafts nobody sent anything to before they expired; how many."""
    now = now or timezone.now()
    stale = SubmissionDraft.objects.filter(
        state__in=(DraftState.UPLOADING, DraftState.FINALIZING), expires_at__lt=now
    ).values_list("pk", flat=True)
    count = 0
    for pk in list(stale):
        with transaction.atomic():
            try:
                _lock_files(DraftFile.objects.filter(draft_id=pk))
            except ChunkError:
                continue  # a chunk is arriving: not abandoned after all
            draft = SubmissionDraft.objects.select_for_update(skip_locked=True).filter(pk=pk, expires_at__lt=now).first()
            if draft is None:
                continue
            draft.state = DraftState.EXPIRED
            draft.save(update_fields=["state"])
            draft.uploads.all().delete()
        checkpoint_io.remove_tree(draft_folder(draft))
        count += 1
    return count
