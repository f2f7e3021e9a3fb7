"""The arena's data: the model catalogue, battles, turns, votes and rating snapshots.

Names of the models in a battle never leave the server before its vote: battles are addressed by a
random ``public_id`` and the voter only ever sees "Model A" and "Model B".
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q


class LanguageModel(models.Model):
    """A model in the catalogue: every model that battles or is scored.

    Arena models carry how to serve them (``backend`` and ``model_args``); models that are only
    scored on the leaderboard leave ``in_arena`` off.
    """

    class Backend(models.TextChoices):
        HF = "hf", "transformers (local)"
        OPENAI = "openai", "OpenAI-compatible endpoint"
        VLLM = "vllm", "vLLM (GPU)"

    name = models.CharField(max_length=200, unique=True)
    family = models.CharField(max_length=200, blank=True, help_text="Two models of one family never meet.")
    backend = models.CharField(max_length=16, choices=Backend.choices, blank=True)
    model_args = models.JSONField(default=dict, blank=True, help_text="path, url, dtype, ... for the backend")
    generation = models.JSONField(default=dict, blank=True, help_text="max_new_tokens, temperature, top_p, seed")
    system_prompt = models.TextField(blank=True)
    weight = models.FloatField(default=1.0, help_text="Relative sampling weight in the arena.")
    queue_suffix = models.CharField(max_length=64, blank=True, help_text="Serve on generate.<suffix> only.")
    in_arena = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=~Q(name=""), name="languagemodel_name_not_empty"),
            models.CheckConstraint(condition=Q(weight__gte=0), name="languagemodel_weight_not_negative"),
        ]

    def __str__(self) -> str:
        return self.name


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
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    style_a = models.JSONField(help_text="tokens, headers, lists, bold of model A's answers")
    style_b = models.JSONField(help_text="the same for model B")
    prompt_tokens = models.PositiveIntegerField(default=0)
    language = models.CharField(max_length=16, blank=True)
    session_hash = models.CharField(max_length=64)
    ip_hash = models.CharField(max_length=64)
    counted = models.BooleanField(default=True, help_text="False when excluded from ratings.")
    excluded_reason = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["battle"], name="vote_one_per_battle"),
            models.CheckConstraint(condition=~Q(model_a=F("model_b")), name="vote_models_differ"),
        ]
        indexes = [models.Index(fields=["counted", "created_at"])]


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
