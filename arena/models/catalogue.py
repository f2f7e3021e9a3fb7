"""The model catalogue's table: every model that battles or is scored, how to serve it, what it is, and
whether it was retired (re-exported by :mod:`arena.models`, where Django finds it).

What a model is (organisation, licence, parameter count, open weights, knowledge cutoff, a link) is shown
on the arena board and in the exports; a retired model no longer battles but keeps its votes and rating,
and is listed on the public page of retirements (docs/arena-ratings.md, "Retired models").
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator, URLValidator
from django.db import models
from django.db.models import Q

from common.query import (  # one rule for the catalogue and the board's filter
    LICENCE_PATTERN,
    ORGANISATION_PATTERN,
)

CUTOFF_PATTERN = r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$"
MAX_PARAMETERS = 10**14  # 100 trillion: a bigger count is a typo


def stand_in(pk: int) -> str:
    """The name every public output (board, API, vote exports) uses for a model whose owner asked to
    withhold its name."""
    return f"withheld-{pk}"


def public_name(model) -> str:
    """The name the public sees for ``model`` (a LanguageModel): its own, or its stand-in if withheld."""
    return stand_in(model.pk) if model.name_withheld else model.name


class LanguageModel(models.Model):
    """A model in the catalogue: every model that battles or is scored.

    Arena models carry how to serve them (``backend`` and ``model_args``); models that are only
    scored on the leaderboard leave ``in_arena`` off.
    """

    class Backend(models.TextChoices):
        HF = "hf", "transformers (local)"
        OPENAI = "openai", "OpenAI-compatible endpoint"
        VLLM = "vllm", "vLLM (CUDA or its CPU build)"

    name = models.CharField(max_length=200, unique=True)
    family = models.CharField(max_length=200, blank=True, help_text="Two models of one family never meet.")
    aliases = models.JSONField(
        default=list,
        blank=True,
        help_text='Other names the model goes by, e.g. ["GPT-4o mini"] (identity filter).',
    )
    maker = models.CharField(
        max_length=200, blank=True, help_text="Who made it, e.g. OpenAI (identity filter)."
    )
    backend = models.CharField(max_length=16, choices=Backend.choices, blank=True)
    model_args = models.JSONField(default=dict, blank=True, help_text="path, url, dtype, ... for the backend")
    generation = models.JSONField(
        default=dict, blank=True, help_text="max_new_tokens, temperature, top_p, seed"
    )
    system_prompt = models.TextField(blank=True)
    weight = models.FloatField(default=1.0, help_text="Relative sampling weight in the arena.")
    queue_suffix = models.CharField(max_length=64, blank=True, help_text="Serve on generate.<suffix> only.")
    in_arena = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # What the model is, shown on the board and in the exports (filterable: organisation, licence, open weights).
    # Database defaults too: rows written by SQL (bulk loads, bench/scale_data.py) need not name these columns.
    organisation = models.CharField(
        max_length=200, blank=True, default="", db_default="", help_text="Who publishes it, e.g. HuggingFace.",
        validators=[RegexValidator(ORGANISATION_PATTERN, "one line of text without invisible or control characters")],
    )  # fmt: skip
    licence = models.CharField(
        max_length=100,
        blank=True,
        default="",
        db_default="",
        validators=[RegexValidator(LICENCE_PATTERN, "a licence name such as apache-2.0")],
    )
    parameter_count = models.PositiveBigIntegerField(null=True, blank=True, help_text="Where known.")
    open_weights = models.BooleanField(default=False, db_default=False, help_text="Anyone may download the weights.")
    knowledge_cutoff = models.CharField(
        max_length=10, blank=True, default="", db_default="", validators=[RegexValidator(CUTOFF_PATTERN, "YYYY, YYYY-MM or YYYY-MM-DD")]
    )
    link = models.URLField(max_length=500, blank=True, default="", db_default="", validators=[URLValidator(schemes=["http", "https"])])
    # Tested in the arena but never shown on the board (public off); the public record of such models
    # then withholds the name where the owner asked (the organisation's count is still shown).
    public = models.BooleanField(default=True, db_default=True, help_text="Shown on the arena board.")
    name_withheld = models.BooleanField(
        default=False, db_default=False, help_text="Not public: the owner asked to withhold the name."
    )
    retired_at = models.DateTimeField(null=True, blank=True, help_text="Retired: no longer battles.")
    retired_reason = models.CharField(max_length=300, blank=True, default="", db_default="")

    class Meta:
        app_label = "arena"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=~Q(name=""), name="languagemodel_name_not_empty"),
            models.CheckConstraint(condition=Q(weight__gte=0), name="languagemodel_weight_not_negative"),
            models.CheckConstraint(
                condition=Q(retired_at__isnull=True) | ~Q(retired_reason=""),
                name="languagemodel_retired_with_reason",
            ),
            models.CheckConstraint(
                condition=Q(parameter_count__isnull=True)
                | Q(parameter_count__gte=1, parameter_count__lte=MAX_PARAMETERS),
                name="languagemodel_parameter_count_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        if self.retired_at is not None and not self.retired_reason.strip():
            raise ValidationError(
                {"retired_reason": "A retired model needs its reason (it is shown publicly)."}
            )
        if self.retired_at is None and self.retired_reason:
            raise ValidationError(
                {"retired_at": "A reason without a retirement date: set the date or clear the reason."}
            )
        if any(ord(c) < 32 for c in self.retired_reason):
            raise ValidationError({"retired_reason": "One line of text, without control characters."})
        if self.name_withheld and self.public:
            raise ValidationError(
                {"name_withheld": "Only a model not shown publicly can have its name withheld."}
            )
