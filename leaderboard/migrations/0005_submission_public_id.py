"""Opaque public ids for submissions (URLs no longer show the sequential primary key)."""

import secrets

from django.db import migrations, models

import leaderboard.models


def fill_public_ids(apps, schema_editor):
    Submission = apps.get_model("leaderboard", "Submission")
    for submission in Submission.objects.filter(public_id__isnull=True).only("pk"):
        submission.public_id = secrets.token_urlsafe(16)
        submission.save(update_fields=["public_id"])


class Migration(migrations.Migration):

    dependencies = [
        ("leaderboard", "0004_submission_tensors_sha256"),
    ]

    operations = [
        migrations.AddField(
            model_name="submission",
            name="public_id",
            field=models.CharField(editable=False, max_length=22, null=True),
        ),
        migrations.RunPython(fill_public_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="submission",
            name="public_id",
            field=models.CharField(
                default=leaderboard.models.new_public_id, editable=False, max_length=22, unique=True
            ),
        ),
    ]
