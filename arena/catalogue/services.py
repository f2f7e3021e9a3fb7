"""Catalogue writes: the leaderboard registers submitted models through here, and staff retire models.

Arena owns :class:`arena.models.LanguageModel`; nothing outside arena writes its table directly.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from arena.models import LanguageModel
from common.query import LICENCE_PATTERN

RETIRE_REASON_MAX = 300  # LanguageModel.retired_reason's length
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def model_register(*, name: str, family: str = "", licence: str = "", open_weights: bool = False) -> LanguageModel:
    """The catalogue entry called ``name``, created (leaderboard-only: ``in_arena`` off) if missing, with
    the submission's ``licence`` and ``open_weights`` (what the board and the model's page show).

    Registering never moves a model into or out of the arena. An existing entry keeps what it says: only
    a leaderboard-only entry with no licence yet (one registered before submissions carried these facts,
    or by a submission that failed and freed the name) takes the new ``licence`` and ``open_weights``;
    an arena model's description is the catalogue file's.
    """
    name, licence = name.strip(), licence.strip()
    if licence and not re.fullmatch(LICENCE_PATTERN[1:-1], licence):
        raise ValidationError({"licence": "A licence name such as apache-2.0 (letters, digits and .+_()/- )."})
    existing = LanguageModel.objects.filter(name=name).first()
    if existing is not None:
        if licence and not existing.in_arena and not existing.licence:
            LanguageModel.objects.filter(pk=existing.pk, licence="").update(licence=licence, open_weights=open_weights)
            existing.refresh_from_db()
        return existing
    model = LanguageModel(name=name, family=family.strip(), in_arena=False, licence=licence, open_weights=open_weights)
    model.full_clean()
    try:
        with transaction.atomic():
            model.save()
    except IntegrityError:  # registered concurrently by another request
        return LanguageModel.objects.get(name=name)
    return model


def retire_reason_clean(reason) -> str:
    """``reason`` as a retirement's reason (one line, shown publicly), or ValidationError saying why not."""
    text = reason.strip() if isinstance(reason, str) else ""
    if not text:
        raise ValidationError("Say why the models are retired: the reason is shown publicly.")
    if len(text) > RETIRE_REASON_MAX or _CONTROL.search(text):
        raise ValidationError(f"One line of text of at most {RETIRE_REASON_MAX} characters, without control characters.")
    return text


@transaction.atomic
def models_retire(pks, *, reason: str) -> list[LanguageModel]:
    """Retire the catalogue entries ``pks`` now, with ``reason`` (shown on the public page of retirements).

    A retired model no longer battles and keeps its votes, rating and rows: nothing is deleted
    (docs/arena-ratings.md, "Retired models"). An entry retired already keeps its date and reason.
    Returns the entries this call retired, by name.
    """
    reason = retire_reason_clean(reason)
    chosen = LanguageModel.objects.select_for_update().filter(pk__in=list(pks), retired_at__isnull=True)
    retired = list(chosen.order_by("name"))
    now = timezone.now()
    for model in retired:
        model.retired_at, model.retired_reason = now, reason
        model.save(update_fields=["retired_at", "retired_reason"])
    return retired
