"""Prompt categories tagged by a model (re-exported by :mod:`arena.models`, where Django finds them).

* :class:`PromptTag`: a tagger's verdict on one prompt under one category protocol, keyed by (tagger,
  protocol hash, prompt hash): the cache (a prompt seen again costs no model call) and the record of
  which tagger and protocol version said what.
* :class:`VoteCategorization`: the tagging queue's unit of work, one per vote: its first prompt's hash
  (the key into the tags) and whether every configured protocol has tagged it.
* :class:`TagReview`: a staff member's check of one tag (confirmed or corrected), from which the
  tagger's agreement with staff is computed per category.

See docs/categories.md.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class PromptTag(models.Model):
    """One prompt's tag under one protocol by one tagger (see the module docs)."""

    prompt_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the first prompt's UTF-8 text")
    category = models.CharField(max_length=48)
    protocol = models.CharField(max_length=100, help_text="the protocol's name")
    protocol_version = models.CharField(max_length=40)
    protocol_sha256 = models.CharField(max_length=64)
    tagger = models.CharField(max_length=300, help_text="the tagger's key: backend, weights hash, dtype")
    tagger_name = models.CharField(max_length=200, blank=True, help_text="the tagger as configured")
    value = models.BooleanField(help_text="in the category")
    score = models.PositiveSmallIntegerField(help_text="criteria answered yes")
    criteria = models.JSONField(default=dict, help_text="each criterion's answer and P(yes)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tagger", "protocol_sha256", "prompt_sha256"], name="prompttag_one_per_key"
            ),
            models.CheckConstraint(condition=~Q(category=""), name="prompttag_category_not_empty"),
        ]
        indexes = [
            models.Index(fields=["prompt_sha256"]),
            models.Index(fields=["category", "value"]),
            # The live board's lookup of a new vote's tags (arena.categories.selectors.tagged_vote_groups):
            # read from the index alone, tags in the category only.
            models.Index(
                fields=["prompt_sha256", "tagger_name", "protocol_sha256"], condition=Q(value=True),
                name="prompttag_live_lookup",
            ),  # fmt: skip
        ]

    def __str__(self) -> str:
        return f"{self.category}={self.value} ({self.protocol} v{self.protocol_version})"


class VoteCategorization(models.Model):
    """Whether a vote's first prompt has been tagged by every configured protocol (see the module docs)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    vote = models.OneToOneField("arena.Vote", on_delete=models.CASCADE, related_name="categorization")
    prompt_sha256 = models.CharField(max_length=64, db_index=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="tagging runs that took this vote")
    error = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["status", "id"])]


class TagReview(models.Model):
    """A staff member's check of one tag: ``value`` is what they say (equal to the tag's: confirmed)."""

    tag = models.ForeignKey(PromptTag, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    value = models.BooleanField(help_text="in the category, as staff see it")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tag", "reviewer"], name="tagreview_one_per_reviewer")]

    @property
    def confirmed(self) -> bool:
        return self.value == self.tag.value
