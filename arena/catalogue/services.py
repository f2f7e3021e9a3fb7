"""Catalogue writes for other apps: the leaderboard registers submitted models through here.

Arena owns :class:`arena.models.LanguageModel`; nothing outside arena writes its table directly.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from arena.models import LanguageModel


def model_register(*, name: str, family: str = "") -> LanguageModel:
    """The catalogue entry called ``name``, created (leaderboard-only: ``in_arena`` off) if missing.

    An existing entry is returned unchanged: registering never moves a model into or out of the arena.
    """
    name = name.strip()
    existing = LanguageModel.objects.filter(name=name).first()
    if existing is not None:
        return existing
    model = LanguageModel(name=name, family=family.strip(), in_arena=False)
    model.full_clean()
    try:
        with transaction.atomic():
            model.save()
    except IntegrityError:  # registered concurrently by another request
        return LanguageModel.objects.get(name=name)
    return model
