"""The arena's data: the model catalogue (its table in :mod:`arena.models_catalogue`), battles, turns, votes
and rating snapshots.

Names of the models in a battle never leave the server before its vote: battles are addressed by a
random ``public_id`` and the voter only ever sees "Model A" and "Model B".
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Func, Q

from arena.models_catalogue import LanguageModel

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
        path = f"{self.__class__.__module__}.{self.__class__.__name__}"
        return path, (self.source_expressions[0].name, self.key), {}


class Battle(models.Model):
    """Two anonymous models answering the same conversation. ``model_a`` is shown on the left."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        VOTED = "voted"
        FAILED = "failed"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    model_a = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="+")
    model_b = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    excluded_reason = models.CharField(max_length=64, blank=True, help_text="Why its vote is not rated.")
    session_hash = models.CharField(max_length=64, db_index=True)
    ip_hash = models.CharField(max_length=64, db_index=True)
    consent_version = models.CharField(max_length=40, blank=True, help_text="The arena terms the voter agreed to.")
    consent_at = models.DateTimeField(null=True, blank=True, help_text="When the voter agreed to them.")
    # The moderation step's verdict on the prompts ({"version", "score", "flagged"}): a voted battle is
    # published only once moderated, and never while held (BattleHold). arena/moderation.py.
    moderation = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(model_a=F("model_b")), name="battle_models_differ"),
        ]

    def __str__(self) -> str:
        return f"battle {self.public_id}"


class Turn(models.Model):
    """One user message and both models' answers to it (with the history before it)."""

    class SideStatus(models.TextChoices):
        PENDING = "pending"
        STREAMING = "streaming"
        DONE = "done"
        ERROR = "error"

    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveSmallIntegerField()
    prompt = models.TextField()
    answer_a = models.TextField(blank=True)
    answer_b = models.TextField(blank=True)
    status_a = models.CharField(max_length=16, choices=SideStatus.choices, default=SideStatus.PENDING)
    status_b = models.CharField(max_length=16, choices=SideStatus.choices, default=SideStatus.PENDING)
    error_a = models.CharField(max_length=300, blank=True)
    error_b = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_a = models.DateTimeField(null=True, blank=True)
    finished_b = models.DateTimeField(null=True, blank=True)
    # What the public sees of this turn: prompt and answers with personal data and secrets replaced
    # (arena/redaction.py), with the redactor's version; recomputed when that changes.
    redacted = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["battle", "index"]
        constraints = [models.UniqueConstraint(fields=["battle", "index"], name="turn_unique_index")]
        # The reaper's scan (arena.services.generation.turns_reap_stale): only turns still answering.
        indexes = [
            models.Index(
                fields=["created_at"],
                name="turn_live_created",
                condition=Q(status_a__in=["pending", "streaming"]) | Q(status_b__in=["pending", "streaming"]),
            )
        ]

    def side_done(self, side: str) -> bool:
        return getattr(self, f"status_{side}") in (self.SideStatus.DONE, self.SideStatus.ERROR)


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
            # The refit's list of languages: one probe per language (arena.vote_columns.LANGUAGES_SQL).
            models.Index(fields=["language"], name="arena_vote_language"),
        ]


class RatingSnapshot(models.Model):
    """One fit of the ratings over the votes up to ``last_vote_at``: what the pages read."""

    class Method(models.TextChoices):
        BT = "bt", "Bradley-Terry"
        ELO = "elo", "Online Elo"
        STYLE = "style", "Style-controlled Bradley-Terry"

    method = models.CharField(max_length=8, choices=Method.choices)
    category = models.CharField(max_length=64, default="overall")
    created_at = models.DateTimeField(auto_now_add=True)
    vote_count = models.PositiveIntegerField()
    first_vote_at = models.DateTimeField(null=True)
    last_vote_at = models.DateTimeField(null=True)
    settings = models.JSONField(default=dict, help_text="ties policy, bootstrap rounds, seed, K, ...")
    rows = models.JSONField(help_text="one dict per model: model, rating, ci_low, ci_high, rank, rank_ub, battles")
    extra = models.JSONField(default=dict, help_text="win matrices, style coefficients, notes")

    class Meta:
        indexes = [models.Index(fields=["method", "category", "-created_at"])]
        ordering = ["-created_at"]


class PairCountBase(models.Model):
    """One category's pair counts as the last full refit fitted them (duplicate prompts once, excluded
    votes out), and the last vote id that refit read: the live fit adds the votes after it
    (:mod:`arena.live`). Replaced as a whole by each refit."""

    category = models.CharField(max_length=64, unique=True)
    high_water = models.BigIntegerField(help_text="the largest vote id the refit could see")
    refit_at = models.DateTimeField()
    vote_count = models.PositiveIntegerField()
    model_names = models.JSONField(help_text="model names; cells index into it")
    cells = models.JSONField(help_text="[i, j, wins_i, wins_j, ties, bothbad] per pair, i < j")


class LiveRating(models.Model):
    """Bradley-Terry point ratings of one category, refitted within a second of each vote (no intervals:
    those come from the latest bootstrap refit, :class:`RatingSnapshot`)."""

    category = models.CharField(max_length=64, unique=True)
    fitted_at = models.DateTimeField()
    fit_seconds = models.FloatField()
    vote_count = models.PositiveIntegerField()
    high_water = models.BigIntegerField(help_text="the largest vote id counted")
    base_high_water = models.BigIntegerField(default=0, help_text="high water of the refit the counts start from")
    base_refit_at = models.DateTimeField(null=True)
    rows = models.JSONField(default=list, help_text="model, rating, battles per model, best first")
    notes = models.JSONField(default=list)


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


class BattleHold(models.Model):
    """A battle kept out of publication until staff decide: its prompts were tagged by the moderation step,
    or a voter reported it. Staff release it (published as usual) or keep it held, in the review queue;
    a new report holds a released battle again."""

    class Reason(models.TextChoices):
        MODERATION = "moderation", "Tagged by moderation"
        REPORT = "report", "Reported by a voter"

    class Status(models.TextChoices):
        HELD = "held", "Held: waiting for review"
        RELEASED = "released", "Released: published"
        KEPT = "kept", "Kept held: never published"

    battle = models.OneToOneField(Battle, on_delete=models.CASCADE, related_name="hold")
    reason = models.CharField(max_length=16, choices=Reason.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.HELD)
    details = models.JSONField(default=dict, help_text="moderation: version and score; reports: reason and time")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"], name="battlehold_queue")]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=["held", "released", "kept"]), name="battlehold_status_valid"),
            models.CheckConstraint(condition=Q(reason__in=["moderation", "report"]), name="battlehold_reason_valid"),
        ]

    def __str__(self) -> str:
        return f"hold {self.status} on battle {self.battle_id} ({self.reason})"


class DataRelease(models.Model):
    """A versioned data release (arena/services/releases.py): Parquet files of published battles (redacted),
    votes and ratings at one snapshot, a dataset card and checksums, in a folder of its own."""

    version = models.CharField(max_length=64, unique=True)
    snapshot = models.ForeignKey(RatingSnapshot, on_delete=models.PROTECT, related_name="releases")
    path = models.CharField(max_length=1000, help_text="The release's folder on the server.")
    files = models.JSONField(default=list, help_text="[{name, bytes, sha256}] of every file in it")
    counts = models.JSONField(default=dict, help_text="battles, votes, ratings rows, held back by reason")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"release {self.version}"


# Prompt categories tagged by a model and each model's rating across refits, kept past snapshot pruning
# (their tables live in arena.models_categories and arena.models_history; Django finds them here).
from arena.models_categories import PromptTag, TagReview, VoteCategorization  # noqa: E402, F401
from arena.models_history import RatingPoint  # noqa: E402, F401
