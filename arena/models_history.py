"""Each model's rating across refits (re-exported by :mod:`arena.models`, where Django finds it).

A :class:`~arena.models.RatingSnapshot` holds every model's row of one fit, and refits prune all but the
latest 200 per method and category (about 33 hours at the refit cadence). :class:`RatingPoint` keeps what a
model's page charts from each snapshot (its rating, interval, rank, battles, the snapshot's vote count and
the scale's anchor), written in the refit's transaction and never pruned with the snapshots; points older
than a week are thinned to the last of each UTC day (:mod:`arena.ratings_history`, docs/arena-ratings.md,
"A model's page").
"""

from __future__ import annotations

from django.db import models


class RatingPoint(models.Model):
    """One model's rating in one snapshot of one method and category."""

    model = models.CharField(max_length=200, help_text="the model's catalogue name, as the snapshot's row has it")
    method = models.CharField(max_length=8, help_text="the snapshot's method: bt, elo or style")
    category = models.CharField(max_length=64)
    at = models.DateTimeField(help_text="the snapshot's time (its created_at)")
    snapshot_id = models.BigIntegerField(help_text="the snapshot it was copied from (pruned later: no foreign key)")
    vote_count = models.PositiveIntegerField(help_text="the snapshot's counted votes")
    rating = models.FloatField()
    ci_low = models.FloatField(null=True, help_text="None: open below")
    ci_high = models.FloatField(null=True, help_text="None: open above")
    rank = models.PositiveIntegerField(null=True, help_text="the row's conservative rank (rank_ub)")
    battles = models.PositiveIntegerField(null=True)
    # The scale's anchor in force (the snapshot's settings["anchor"]); an empty model: centred.
    anchor_model = models.CharField(max_length=200, blank=True, default="")
    anchor_rating = models.FloatField(null=True)
    anchor_applied = models.BooleanField(default=False)

    class Meta:
        app_label = "arena"
        constraints = [
            # The page's read (one model, method and category in time order) and thinning's "a later
            # point the same day" probe; a back-fill run twice adds nothing.
            models.UniqueConstraint(fields=["model", "method", "category", "at"], name="ratingpoint_unique_key_time"),
        ]
        indexes = [models.Index(fields=["at"], name="ratingpoint_at")]  # thinning's window of newly aged points

    def __str__(self) -> str:
        return f"{self.model} {self.method}/{self.category} {self.at:%Y-%m-%d %H:%M}: {self.rating:.0f}"
