"""Each model's rating across refits, kept past snapshot pruning (arena.models.ratings.RatingPoint), and
its back-fill from the snapshots stored when this runs (arena.ratings.history.history_backfill: every
rated row of every snapshot, then one thinning: a point older than a week only as its day's last)."""

from django.db import migrations, models


def backfill(apps, schema_editor):
    from arena.ratings.history import history_backfill

    history_backfill(snapshots=apps.get_model("arena", "RatingSnapshot"), points=apps.get_model("arena", "RatingPoint"))


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0015_catalogue_database_defaults"),
    ]

    operations = [
        migrations.CreateModel(
            name="RatingPoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("model", models.CharField(help_text="the model's catalogue name, as the snapshot's row has it", max_length=200)),
                ("method", models.CharField(help_text="the snapshot's method: bt, elo or style", max_length=8)),
                ("category", models.CharField(max_length=64)),
                ("at", models.DateTimeField(help_text="the snapshot's time (its created_at)")),
                ("snapshot_id", models.BigIntegerField(help_text="the snapshot it was copied from (pruned later: no foreign key)")),
                ("vote_count", models.PositiveIntegerField(help_text="the snapshot's counted votes")),
                ("rating", models.FloatField()),
                ("ci_low", models.FloatField(help_text="None: open below", null=True)),
                ("ci_high", models.FloatField(help_text="None: open above", null=True)),
                ("rank", models.PositiveIntegerField(help_text="the row's conservative rank (rank_ub)", null=True)),
                ("battles", models.PositiveIntegerField(null=True)),
                ("anchor_model", models.CharField(blank=True, default="", max_length=200)),
                ("anchor_rating", models.FloatField(null=True)),
                ("anchor_applied", models.BooleanField(default=False)),
            ],
            options={
                "indexes": [models.Index(fields=["at"], name="ratingpoint_at")],
                "constraints": [
                    models.UniqueConstraint(fields=("model", "method", "category", "at"), name="ratingpoint_unique_key_time")
                ],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
