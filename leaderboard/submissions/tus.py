"""The tus 1.0.0 endpoint for a submission's files: ``/leaderboard/uploads/``.

Core protocol plus the creation, termination, checksum and expiration extensions
(https://tus.io/protocols/resumable-upload). Signed-in browsers (session cookie and CSRF token)
and scripts (``Authorization: Bearer <API token>``) use the same endpoint. ``Upload-Metadata``
names the submission (``submission``: its public id, from ``POST /api/submissions/``) and the file
(``filename``). The body of a PATCH is streamed to disk block by block; see docs/uploads.md.
"""

from __future__ import annotations

import base64
import binascii
import logging
import socket

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import reverse
from django.utils.http import http_date
from django.views.decorators.csrf import csrf_exempt

from leaderboard.accounts import tokens
from leaderboard.models import DraftFile
from leaderboard.submissions import chunks, transfers

log = logging.getLogger(__name__)
VERSION = "1.0.0"
EXTENSIONS = "creation,termination,checksum,expiration"
MAX_METADATA = 4096


def _headers(response: HttpResponse) -> HttpResponse:
    response["Tus-Resumable"] = VERSION
    response["Cache-Control"] = "no-store"
    return response


def _error(message: str, status: int) -> HttpResponse:
    response = JsonResponse({"detail": message}, status=status)
    if status == 412:
        response["Tus-Version"] = VERSION
    return _headers(response)


def _owner(request):
    """The requester: an API token's owner, or the session's user (whose unsafe requests need the
    CSRF token, as every form's do). Raises ChunkError 401/403."""
    raw = tokens.bearer(request.META.get("HTTP_AUTHORIZATION", ""))
    if raw is not None:
        try:
            return tokens.token_user(raw)
        except tokens.TokenError as exc:
            raise chunks.ChunkError(str(exc), 401) from None
    user = getattr(request, "user", AnonymousUser())
    if not user.is_authenticated:
        raise chunks.ChunkError("Sign in, or send an API token as 'Authorization: Bearer <token>'.", 401)
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        rejected = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
        if rejected is not None:
            raise chunks.ChunkError("CSRF check failed: send the X-CSRFToken header.", 403)
    return user


def _int_header(request, name: str) -> int:
    value = request.headers.get(name)
    if value is None or not value.isdigit() or len(value) > 18:
        raise chunks.ChunkError(f"{name} must be a non-negative integer.", 400)
    return int(value)


def parse_metadata(header: str) -> dict[str, str]:
    """``Upload-Metadata``: comma-separated ``key base64(value)`` pairs."""
    if len(header) > MAX_METADATA:
        raise chunks.ChunkError("Upload-Metadata is too long.", 400)
    result = {}
    for pair in filter(None, (p.strip() for p in header.split(","))):
        key, _, encoded = pair.partition(" ")
        try:
            result[key] = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise chunks.ChunkError(f"Upload-Metadata value of {key[:40]!r} is not base64 of UTF-8 text.", 400) from None
    return result


def _expires(upload: DraftFile) -> str:
    return http_date(upload.draft.expires_at.timestamp())


@csrf_exempt  # checked in _owner for session users; token users carry no cookie
def uploads(request):
    """OPTIONS (what the server supports) and POST (create an upload)."""
    try:
        if request.method == "OPTIONS":
            response = HttpResponse(status=204)
            response["Tus-Version"] = VERSION
            response["Tus-Extension"] = EXTENSIONS
            response["Tus-Checksum-Algorithm"] = ",".join(chunks.CHECKSUM_ALGORITHMS)
            response["Tus-Max-Size"] = str(settings.LEADERBOARD_MAX_UPLOAD_BYTES)
            return _headers(response)
        if request.method != "POST":
            return _error("Use POST to create an upload (or OPTIONS).", 405)
        if request.headers.get("Tus-Resumable") != VERSION:
            return _error(f"This server speaks tus {VERSION}: send Tus-Resumable: {VERSION}.", 412)
        owner = _owner(request)
        if request.headers.get("Upload-Defer-Length"):
            return _error("Upload-Defer-Length is not supported: declare Upload-Length.", 400)
        length = _int_header(request, "Upload-Length")
        metadata = parse_metadata(request.headers.get("Upload-Metadata", ""))
        if not metadata.get("submission") or not metadata.get("filename"):
            return _error("Upload-Metadata must name 'submission' (its public id) and 'filename'.", 400)
        upload = transfers.upload_create(
            owner=owner, draft_id=metadata["submission"], name=metadata["filename"], length=length
        )
    except chunks.ChunkError as exc:
        return _error(str(exc), exc.status)
    response = HttpResponse(status=201)
    response["Location"] = request.build_absolute_uri(reverse("leaderboard:upload", args=[upload.public_id]))
    response["Upload-Expires"] = _expires(upload)
    return _headers(response)


@csrf_exempt  # see uploads()
def upload(request, upload_id: str):
    """HEAD (the offset the server holds), PATCH (a chunk at that offset), DELETE (terminate)."""
    if request.method == "OPTIONS":
        return uploads(request)
    if request.headers.get("Tus-Resumable") != VERSION:
        return _error(f"This server speaks tus {VERSION}: send Tus-Resumable: {VERSION}.", 412)
    try:
        owner = _owner(request)
        if request.method == "HEAD":
            found = transfers.upload_for_owner(owner, upload_id)
            transfers.draft_check_open(found.draft)
            response = HttpResponse(status=200)
            response["Upload-Offset"] = str(found.offset)
            response["Upload-Length"] = str(found.length)
            response["Upload-Expires"] = _expires(found)
            return _headers(response)
        if request.method == "DELETE":
            transfers.upload_terminate(owner=owner, upload_id=upload_id)
            return _headers(HttpResponse(status=204))
        if request.method != "PATCH":
            return _error("Use HEAD, PATCH or DELETE on an upload.", 405)
        return _patch(request, owner, upload_id)
    except chunks.ChunkError as exc:
        return _error(str(exc), exc.status)
    except transfers.Refused as exc:
        return _error("The submission was refused and its files removed: " + " ".join(exc.messages), 422)


class SocketBody:
    """A request body read straight from gunicorn's socket.

    gunicorn's ``wsgi.input`` hands out a body in 1 KiB steps through a BytesIO (about 400 MB/s
    measured here, against 1.6 GB/s for ``recv``); its sync worker closes every connection after
    one response, so nothing else reads this socket after us. What gunicorn had already buffered
    comes first. ``MSG_WAITALL`` fills a whole block in one call on the sync worker's blocking
    socket (fewer calls than one per segment that happened to be in; ``chunks._fill`` still loops
    over short reads, which a socket with a timeout returns).
    """

    def __init__(self, sock, buffered: bytes):
        self.sock, self.buffered = sock, buffered

    def readinto(self, view: memoryview) -> int:
        if self.buffered:
            n = min(len(view), len(self.buffered))
            view[:n], self.buffered = self.buffered[:n], self.buffered[n:]
            return n
        return self.sock.recv_into(view, 0, socket.MSG_WAITALL)


def body_stream(request):
    """The fastest safe reader of this request's body: the socket under gunicorn's sync worker
    (one request per connection, a Content-Length body), else Django's own stream."""
    meta = request.META
    body, sock = meta.get("wsgi.input"), meta.get("gunicorn.socket")
    reader = getattr(body, "reader", None)
    unread = getattr(getattr(reader, "unreader", None), "buf", None)
    if sock is None or meta.get("wsgi.multithread") or type(reader).__name__ != "LengthReader" or unread is None:
        return request
    return SocketBody(sock, body.buf.getvalue() + unread.getvalue())


def _patch(request, owner, upload_id: str) -> HttpResponse:
    if request.content_type != "application/offset+octet-stream":
        return _error("A PATCH carries Content-Type: application/offset+octet-stream.", 415)
    if request.META.get("CONTENT_LENGTH") in (None, ""):
        return _error("Send Content-Length with each chunk.", 411)
    length = _int_header(request, "Content-Length")
    offset = _int_header(request, "Upload-Offset")
    received = transfers.chunk_receive(
        owner=owner, upload_id=upload_id, offset=offset, length=length,
        checksum_header=request.headers.get("Upload-Checksum"), stream=body_stream(request),
    )  # fmt: skip
    response = HttpResponse(status=204)
    response["Upload-Offset"] = str(received.offset)
    response["Upload-Expires"] = _expires(received)
    if received.draft.state != "UPLOADING":
        response["Podium-Submission-State"] = received.draft.state
    return _headers(response)
