"""An arena model evaluated through the OpenAI-compatible endpoint that serves it (staff, from the admin).

The submission is weightless (source ``endpoint``) and belongs to the model's own catalogue entry, so
its scores land on the board row that carries its arena rating and judge score (docs/leaderboard.md,
"Arena models evaluated through their endpoint").
"""

from __future__ import annotations

import logging
import re
import urllib.parse

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from arena.models import LanguageModel
from leaderboard.models import Submission
from leaderboard.submissions.services import submission_enqueue, submission_requeue

log = logging.getLogger(__name__)


ENDPOINT_BACKEND = "openai-chat"  # the engine's chat-completions backend: the server applies the chat template
_SECRET_ARG = re.compile(r"(^|_)(api_?key|key|token|secret|password|passwd|auth\w*)$", re.IGNORECASE)


def endpoint_spec(model: LanguageModel) -> dict:
    """How a worker evaluates arena ``model`` through the endpoint that serves it: ``{"backend", "args"}``.

    Only an OpenAI-compatible endpoint (catalogue backend ``openai``) qualifies: a model served from
    local weights (``hf``, ``vllm``) is a checkpoint, evaluated from its folder as a store submission
    (its weights hashed). Arguments that would hold a secret are refused: a key is named by ``api_key_env``.
    Raises ValidationError with what to fix.
    """
    if model.backend != LanguageModel.Backend.OPENAI:
        if model.backend:
            raise ValidationError(
                f"{model.name} is served from local weights ({model.backend} backend), not by an endpoint: "
                "evaluate its checkpoint as a submission from the model store instead (its weights are then hashed)."
            )
        raise ValidationError(f"{model.name} has no backend: give it an OpenAI-compatible endpoint (backend openai).")
    args = dict(model.model_args or {})
    url = args.get("base_url")
    parts = urllib.parse.urlsplit(url.strip()) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"{model.name} has no endpoint: its model_args need base_url, an http(s) URL such as "
                              "http://127.0.0.1:8000/v1.")  # fmt: skip
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValidationError(f"{model.name}'s base_url carries credentials or a query: give the API root only, "
                              "and name the variable that holds the key in api_key_env.")  # fmt: skip
    secrets_given = sorted(key for key in args if key != "api_key_env" and _SECRET_ARG.search(str(key)))
    if secrets_given:
        raise ValidationError(f"{model.name}'s model_args hold {', '.join(secrets_given)}: a key is never stored; "
                              "name the environment variable that holds it in api_key_env.")  # fmt: skip
    return {"backend": ENDPOINT_BACKEND, "args": args}


def endpoint_evaluation_current(model: LanguageModel) -> Submission | None:
    """``model``'s finished endpoint evaluation whose scores are on its board row (None: there is none)."""
    return Submission.objects.filter(language_model=model, source=Submission.Source.ENDPOINT,
                                     status=Submission.Status.FINISHED, superseded_by__isnull=True).first()  # fmt: skip


def endpoint_evaluation_request(*, model: LanguageModel, requested_by,
                                rerun_of: int | None = None) -> tuple[Submission, bool]:  # fmt: skip
    """Queue the benchmark suite on arena ``model`` through its endpoint (staff only): (submission, created).

    A weightless submission (source ``endpoint``) of the model's own catalogue entry, so its scores land
    on the board row that carries the model's arena rating and judge score; run by the ``evaluate``
    worker like any submission. One is queued or running: that one is returned, nothing sent (two
    clicks at once are kept apart by a lock and a unique constraint). The last one failed with the same
    endpoint: it is requeued (tasks it finished are kept). Refused (ValidationError): a model without an
    endpoint, one whose checkpoint was submitted (it has its row already), and one already evaluated
    unless ``rerun_of`` names its current evaluation (staff confirmed replacing that one; a confirmation
    overtaken by another re-run is refused): then a new submission runs the current suite afresh, and when it
    finishes its scores replace the old ones on the board row (:func:`submission_finish` sets the old
    one's ``superseded_by``; its runs and protocols stay recorded). Until then, or if it fails, the old
    scores stay.
    """
    if not (requested_by.is_authenticated and requested_by.is_staff):
        raise PermissionDenied("Only staff can evaluate an arena model.")
    spec = endpoint_spec(model)
    with transaction.atomic():
        LanguageModel.objects.select_for_update().filter(pk=model.pk).first()  # one request per model at a time
        mine = Submission.objects.filter(language_model=model, source=Submission.Source.ENDPOINT)
        live = mine.filter(status__in=Submission.ACTIVE).first()
        if live is not None:
            return live, False
        current = endpoint_evaluation_current(model)
        if current is not None and current.pk != rerun_of:
            raise ValidationError(f"{model.name} was already evaluated through its endpoint ({current.get_status_display().lower()}"
                                  f" {current.finished_at:%Y-%m-%d %H:%M}): its scores are on the board. Re-run it "
                                  "(confirm) to replace them.")  # fmt: skip
        checkpoint = (
            Submission.objects.filter(language_model=model).exclude(source=Submission.Source.ENDPOINT)
            .exclude(status=Submission.Status.FAILED).first()
        )  # fmt: skip
        if checkpoint is not None:
            raise ValidationError(f"{model.name}'s checkpoint was submitted ({checkpoint}): its board row already "
                                  "carries the arena rating; evaluate that, not the endpoint.")  # fmt: skip
        failed = mine.filter(endpoint=spec, status=Submission.Status.FAILED)
        if current is not None:  # a re-run resumes only a re-run that failed, never an attempt from before
            failed = failed.filter(pk__gt=current.pk)
        failed = failed.order_by("-id").first()
        if failed is not None:  # the same endpoint failed before (unreachable?): run it again, resuming
            return submission_requeue(failed), True
        submission = Submission(
            owner=requested_by, model_name=model.name, language_model=model, model_type=Submission.ModelType.CHAT,
            licence=model.licence or "unknown", precision="", apply_chat_template=True,
            source=Submission.Source.ENDPOINT, architecture="", parameter_count=model.parameter_count,
            endpoint=spec,
        )  # fmt: skip
        submission.full_clean()
        submission.save()
        submission_enqueue(submission)
    log.info("endpoint evaluation %s of %s queued by %s%s", submission.pk, model.name, requested_by.pk,
             f" (re-run of {current.pk})" if current is not None else "")  # fmt: skip
    return submission, True
