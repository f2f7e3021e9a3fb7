"""Votes and flagged voters (re-exported by :mod:`arena.models`, where Django finds them).

A vote's style counts are read from its style JSON by :class:`StyleCount` into generated, stored columns,
so the refit reads plain columns.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Func, Q

from arena.models.battles import Battle
from arena.models.catalogue import LanguageModel

STYLE_KEYS = ("tokens", "headers", "list_items", "bold")


class StyleCount(Func):
    """One style count read from a vote's style JSON: the value when it is a JSON number, else 0
    (``list_items`` also answers to its older name ``lists``). The refit reads these as plain columns
    (generated and stored by the database), so 10M votes never parse JSON at fit time."""

    output_field = models.FloatField()

    def __init__(self, column: str, key: str, **extra):
        super().__init__(F(column), **extra)
        self.key = key

    def _keys(self) -> list[str]:
        return [self.key, "lists"] if self.key == "list_items" else [self.key]

    def as_postgresql(self, compiler, connection, **extra):
        column, params = compiler.compile(self.source_expressions[0])
        whens = " ".join(
            f"WHEN jsonb_typeof({column} -> '{key}') = 'number' THEN ({column} ->> '{key}')::float8"
            for key in self._keys()
        )
        return f"(CASE {whens} ELSE 0 END)", params

    def as_sql(self, compiler, connection, **extra):  # SQLite
        column, params = compiler.compile(self.source_expressions[0])
        whens = " ".join(
            f"WHEN json_type({column}, '$.{key}') IN ('integer', 'real') THEN json_extract({column}, '$.{key}')"
            for key in self._keys()
        )
        return f"(CASE {whens} ELSE 0 END)", params

    def deconstruct(self):
        path = "arena.models.StyleCount"  # as the migrations name it (re-exported there)
        return path, (self.source_expressions[0].name, self.key), {}


class Vote(models.Model):
    """The voter's verdict on a battle, with everything the rating methods need."""

    class Winner(models.TextChoices):
        MODEL_A = "model_a", "A is better"
        MODEL_B = "model_b", "B is better"
        TIE = "tie", "Tie"
        BOTH_BAD = "tie (bothbad)", "Both are bad"

    battle = models.OneToOneField(Battle, on_delete=models.CASCADE, related_name="vote")
    model_a = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="+")
    model_b = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="+")
    winner = models.CharField(max_length=16, choices=Winner.choices)
    model_a_position = models.CharField(max_length=5, choices=[("left", "left"), ("right", "right")])
    turn_count = models.PositiveSmallIntegerField()
    battle_started_at = models.DateTimeField()
    consent_version = models.CharField(max_length=40, blank=True, help_text="The arena terms the voter agreed to.")
    consent_at = models.DateTimeField(null=True, blank=True, help_text="When the voter agreed to them.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    style_a = models.JSONField(help_text="tokens, headers, lists, bold of model A's answers")
    style_b = models.JSONField(help_text="the same for model B")
    # Numeric copies of the style counts, computed and stored by the database (StyleCount above).
    style_a_tokens = models.GeneratedField(
        expression=StyleCount("style_a", "tokens"), output_field=models.FloatField(), db_persist=True
    )
    style_a_headers = models.GeneratedField(
        expression=StyleCount("style_a", "headers"), output_field=models.FloatField(), db_persist=True
    )
    style_a_list_items = models.GeneratedField(
        expression=StyleCount("style_a", "list_items"), output_field=models.FloatField(), db_persist=True
    )
    style_a_bold = models.GeneratedField(
        expression=StyleCount("style_a", "bold"), output_field=models.FloatField(), db_persist=True
    )
    style_b_tokens = models.GeneratedField(
        expression=StyleCount("style_b", "tokens"), output_field=models.FloatField(), db_persist=True
    )
    style_b_headers = models.GeneratedField(
        expression=StyleCount("style_b", "headers"), output_field=models.FloatField(), db_persist=True
    )
    style_b_list_items = models.GeneratedField(
        expression=StyleCount("style_b", "list_items"), output_field=models.FloatField(), db_persist=True
    )
    style_b_bold = models.GeneratedField(
        expression=StyleCount("style_b", "bold"), output_field=models.FloatField(), db_persist=True
    )
    prompt_tokens = models.PositiveIntegerField(default=0)
    language = models.CharField(max_length=16, blank=True)
    prompt_hash = models.CharField(
        max_length=64,
        blank=True,
        help_text="SHA-256 of the normalised prompts (duplicate prompts count once).",
    )
    session_hash = models.CharField(max_length=64)
    ip_hash = models.CharField(max_length=64)
    counted = models.BooleanField(default=True, help_text="False when excluded from ratings.")
    excluded_reason = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["battle"], name="vote_one_per_battle"),
            models.CheckConstraint(condition=~Q(model_a=F("model_b")), name="vote_models_differ"),
        ]
        indexes = [
            models.Index(fields=["counted", "created_at"]),
            # The refit's fingerprint (count, max and sum of counted ids) as an index-only scan: 0.9 s at
            # 10M votes instead of a 2.4 s scan of the table.
            models.Index(fields=["id"], condition=Q(counted=True), name="arena_vote_counted_id"),
            # The refit's list of languages: one probe per language (arena.votes.columns.LANGUAGES_SQL).
            models.Index(fields=["language"], name="arena_vote_language"),
        ]


class VoterFlag(models.Model):
    """A voter (session or IP hash) whose votes the anomalous-voter test finds surprising under the fit.

    Flags wait for an admin (the review queue); a confirmed voter's votes stop counting
    (``excluded_reason="voter_flagged"``), a dismissed one is left alone and not flagged again.
    """

    class Kind(models.TextChoices):
        SESSION = "session", "Session"
        IP = "ip", "IP address"

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for review"
        CONFIRMED = "confirmed", "Confirmed: votes excluded"
        DISMISSED = "dismissed", "Dismissed"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    voter_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    votes = models.PositiveIntegerField(help_text="Counted votes tested when it was flagged.")
    p_value = models.FloatField()
    statistics = models.JSONField(
        default=dict, help_text="p_surprise, p_random, p_favour, favoured model, ..."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "voter_hash"], name="voterflag_one_per_voter"),
            models.CheckConstraint(condition=Q(kind__in=["session", "ip"]), name="voterflag_kind_valid"),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "confirmed", "dismissed"]), name="voterflag_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.voter_hash[:12]} ({self.status})"
