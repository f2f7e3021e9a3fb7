"""The submissions API for scripts and CI: create a submission, then send its files through the
resumable upload endpoint (tus, ``/leaderboard/uploads/``), then read its status and scores.

Authenticated by a personal API token (``Authorization: Bearer pdm_...``, made on the account
page) or a signed-in session (with its CSRF token). Creating is throttled (``submissions`` scope).
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView

from common.public_ids import moved
from leaderboard.submissions import selectors, services, transfers
from leaderboard.submissions.forms import NAME_HELP, SubmissionMetadataForm


class OutcomeThrottle(UserRateThrottle):
    """A POST-only throttle that counts outcomes, not attempts: :meth:`allow_request` only checks the
    count, and the view :meth:`record` s a request once its answer is known. Reads keep the ordinary
    rates. (Check and record are two cache operations: concurrent POSTs may pass one or two over.)"""

    def allow_request(self, request, view):
        if request.method != "POST" or self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        self.history = [t for t in self.cache.get(self.key, []) if t > self.now - self.duration]
        return self.throttle_failure() if len(self.history) >= self.num_requests else True

    def record(self, request, view) -> None:
        key = self.get_cache_key(request, view)
        if self.rate is None or key is None:
            return
        now = self.timer()
        history = [t for t in self.cache.get(key, []) if t > now - self.duration]
        self.cache.set(key, [now, *history][: self.num_requests], self.duration)


class SubmissionCreateThrottle(OutcomeThrottle):
    """Submissions created (201s only): ``API_THROTTLE_SUBMISSIONS``. An owner fixing a refused form is
    not locked out by their own mistakes."""

    scope = "submissions"


class SubmissionRefusedThrottle(OutcomeThrottle):
    """Refused creations (400, 401, 403, 415, ...): ``API_THROTTLE_SUBMISSIONS_REFUSED``, higher, so a
    client looping on errors is still slowed."""

    scope = "submissions_refused"


WEIGHT_SHA256 = r"^[0-9a-f]{64}$"


class SubmissionCreateSerializer(serializers.Serializer):
    model_name = serializers.CharField(help_text=NAME_HELP)
    model_type = serializers.ChoiceField(choices=["pretrained", "fine-tuned", "chat", "merge"])
    base_model = serializers.CharField(required=False, help_text="Required for fine-tunes and merges.")
    licence = serializers.CharField()
    open_weights = serializers.BooleanField(required=False, help_text="Anyone may download the weights (default false).")
    precision = serializers.ChoiceField(choices=["float32", "bfloat16", "float16"], required=False)
    apply_chat_template = serializers.BooleanField(required=False)
    private = serializers.BooleanField(required=False)
    files = serializers.DictField(child=serializers.IntegerField(min_value=1),
                                  help_text="Every file of the checkpoint: {name: size in bytes}.")  # fmt: skip
    weight_sha256 = serializers.RegexField(
        WEIGHT_SHA256, required=False,
        help_text="Optional: SHA-256 over the safetensors files' names (each followed by a NUL byte) and bytes, "
        "in name order. Weights you submitted before are then refused before any byte is sent (409, with "
        "existing_submission); the server still hashes what arrives.",
    )  # fmt: skip


DraftSerializer = inline_serializer(
    name="SubmissionUpload",
    fields={
        "id": serializers.CharField(help_text="The submission's public id: Upload-Metadata 'submission'."),
        "status": serializers.CharField(),
        "upload_url": serializers.URLField(help_text="The tus endpoint to create each file's upload at."),
        "expires_at": serializers.DateTimeField(),
    },
)
DetailSerializer = inline_serializer(name="SubmissionRefusal", fields={"detail": serializers.CharField()})
AUTH_RESPONSES = {
    401: OpenApiResponse(DetailSerializer, description="No valid credentials: a missing, unknown or revoked API token."),
    403: OpenApiResponse(DetailSerializer, description="Signed in by session without the CSRF token."),
}
StatusSerializer = inline_serializer(
    name="SubmissionState",
    fields={
        "id": serializers.CharField(),
        "status": serializers.CharField(help_text="UPLOADING, FINALIZING, REFUSED, EXPIRED (files), then "
                                                  "PENDING, RUNNING, FINISHED, FAILED (evaluation)."),  # fmt: skip
        "errors": serializers.ListField(child=serializers.CharField(), required=False),
        "files": serializers.ListField(child=serializers.DictField(), required=False),
        "progress": serializers.DictField(required=False),
        "queue": serializers.DictField(required=False, allow_null=True,
                                       help_text="PENDING only: position, ahead, running and a sentence."),
        "summary": serializers.DictField(required=False, help_text="tasks_done, tasks_total, stage, "
                                         "current_task, requests, percent: the progress as the pages show it."),
        "failure_reason": serializers.CharField(required=False),
        "results": serializers.ListField(child=serializers.DictField(), required=False),
    },
)


class SubmissionCreateMixin:
    """``POST /api/submissions/`` beside the public list's GET (composed in api_urls)."""

    permission_classes = [IsAuthenticatedOrReadOnly]

    def get_throttles(self):
        return [*super().get_throttles(), SubmissionCreateThrottle(), SubmissionRefusedThrottle()]

    def finalize_response(self, request, response, *args, **kwargs):
        """Count the POST by its outcome: a creation, or a refusal (a 429 counts as neither)."""
        if request.method == "POST" and response.status_code != status.HTTP_429_TOO_MANY_REQUESTS:
            created = response.status_code == status.HTTP_201_CREATED
            kind = SubmissionCreateThrottle if created else SubmissionRefusedThrottle
            if created or response.status_code >= 400:
                kind().record(request, self)
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(request=SubmissionCreateSerializer,
                   responses={201: DraftSerializer, 409: OpenApiResponse(description="Weights you submitted "
                              "before (weight_sha256): the message and existing_submission, its page."),
                              **AUTH_RESPONSES},
                   summary="Create a submission; then upload its files with tus")  # fmt: skip
    def post(self, request):
        body, errors = _checked_body(request.data)
        if errors:
            return _invalid(errors)
        files = body.get("files")
        declared_sha = body.get("weight_sha256")
        if declared_sha is not None and not (isinstance(declared_sha, str) and re.fullmatch(WEIGHT_SHA256, declared_sha)):
            return _invalid({"weight_sha256": ["must be 64 lowercase hexadecimal digits (a SHA-256), or left out"]})
        form = SubmissionMetadataForm({k: v for k, v in body.items() if k not in ("files", "weight_sha256")})
        if not form.is_valid():
            return _invalid(form.errors)
        existing = services.own_duplicate(request.user, declared_sha) if declared_sha else None
        if existing is not None:  # refused before the bytes: nothing is created, nothing is sent
            return Response(
                {"files": [services.own_duplicate_message(existing)],
                 "existing_submission": reverse("leaderboard:submission", args=[existing.public_id])},
                status=status.HTTP_409_CONFLICT,
            )  # fmt: skip
        try:
            draft = transfers.draft_create(owner=request.user, metadata=form.cleaned_data, files=files)
        except ValidationError as exc:  # the files' names and sizes, the weekly limit, a name taken
            return _invalid(exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages})
        payload = {
            "id": draft.public_id, "status": draft.state, "expires_at": draft.expires_at.isoformat(),
            "upload_url": request.build_absolute_uri(reverse("leaderboard:uploads")),
        }  # fmt: skip
        return Response(payload, status=status.HTTP_201_CREATED)


CREATE_FIELDS = tuple(SubmissionCreateSerializer().fields)
BOOLEAN_FIELDS = ("apply_chat_template", "private", "open_weights")
_BOOLEAN_TEXT = {"true": True, "false": False}


def _checked_body(data) -> tuple[dict, dict]:
    """(the body's fields, errors): a JSON object of known fields, booleans as true or false.

    Before, a body that was not an object answered "This field is required." for every field, an
    unknown or read-only field (``owner``, ``status``) was dropped without a word, and any text was a
    true boolean ("maybe" made a private submission).
    """
    if not isinstance(data, dict):
        return {}, {"__all__": [f"the body must be a JSON object of the submission's fields, got {type(data).__name__}"]}
    body = {key: (data.get(key) if hasattr(data, "getlist") else data[key]) for key in data}
    errors = {}
    unknown = sorted(str(key) for key in body if key not in CREATE_FIELDS)
    for key in unknown[:10]:
        errors[key[:80]] = [f"unknown field; the fields are: {', '.join(CREATE_FIELDS)}"]
    for key in BOOLEAN_FIELDS:
        value = body.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str) and value.strip().lower() in _BOOLEAN_TEXT:
            body[key] = _BOOLEAN_TEXT[value.strip().lower()]
        else:
            errors[key] = [f"must be true or false, got {str(value)[:40]!r}"]
    return body, errors


def _invalid(errors) -> Response:
    """400 in the API's shape (common.api_errors): {field or "non_field_errors": [sentences]}."""
    body = {("non_field_errors" if k == "__all__" else k): [str(m) for m in v] for k, v in errors.items()}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


class SubmissionDetail(APIView):
    """``GET /api/submissions/{public_id}/``: while files arrive, what the server holds of each;
    then the evaluation's status, progress and scores."""

    @extend_schema(responses={200: StatusSerializer, 401: AUTH_RESPONSES[401]},
                   summary="A submission's upload or evaluation status and scores")  # fmt: skip
    def get(self, request, public_id: str):
        submission = selectors.submission_visible(request.user, public_id)
        if submission is not None:
            state = selectors.submission_status(submission, request.user)
            if not (request.user.is_authenticated and submission.owner_id == request.user.pk):
                state.pop("log_tail", None)
            return Response({**state, "results": selectors.submission_results(submission, request.user)})
        draft = selectors.draft_for_owner(request.user, public_id)
        if draft is None:
            raise NotFound("No such submission.")
        return Response(selectors.draft_status(draft))


@extend_schema(exclude=True)
class SubmissionByRow(APIView):
    """``/api/submissions/<row id>/``: earlier versions listed submissions by row number; a permanent
    redirect to the public id (common.public_ids) where the requester may see it, else a 404."""

    def get(self, request, row_id: int):
        public_id = selectors.submission_public_id_of_row(request.user, row_id)
        if public_id is None:
            raise NotFound("No such submission.")
        return moved(request, reverse("leaderboard-api:submission-detail", args=[public_id]))
