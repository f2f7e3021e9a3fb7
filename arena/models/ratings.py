"""Rating snapshots, the live board's counts and ratings, and each model's rating across refits
(re-exported by :mod:`arena.models`, where Django finds them).

A :class:`~arena.models.RatingSnapshot` holds every model's row of one fit, and refits prune all but the
latest 200 per method and category (about 33 hours at the refit cadence). :class:`RatingPoint` keeps what a
model's page charts from each snapshot (its rating, interval, rank, battles, the snapshot's vote count and
the scale's anchor), written in the refit's transaction and never pruned with the snapshots; points older
than a week are thinned to the last of each UTC day (:mod:`arena.ratings.history`, docs/arena-ratings.md,
"A model's page").
"""

from __future__ import annotations

from django.db import models


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
    (:mod:`arena.ratings.live`). Replaced as a whole by each refit."""

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
