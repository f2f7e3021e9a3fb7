"""The arena's data: the catalogue of models (every model that battles or is scored)."""

from __future__ import annotations

from django.db import models


class LanguageModel(models.Model):
    """A model in the catalogue. Its name is public only after a vote, never before."""

    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(name=""), name="languagemodel_name_not_empty"),
        ]

    def __str__(self) -> str:
        return self.name
