"""Submissions carry the owner's "open weights", and the arena catalogue shows a submission's licence and
open weights (before, ``model_register`` wrote neither: the catalogue said "-" and "no").

The data step fixes the rows registered before: a leaderboard-only catalogue entry (``in_arena`` off) with
no licence takes its latest submission's licence, where the catalogue's licence rule takes it. Those
submissions were made before the form asked about open weights, so an open-source licence (the list
below: OSI-approved and public-domain licences as the Hugging Face Hub names them) stands for the owner's
word, on the submission and in the catalogue; any other licence (proprietary, a model licence such as
llama3.1, other, unknown) leaves open weights off. New submissions say it themselves (the form's box).
An arena model (declared in the catalogue file) is the file's to describe and is not touched.
"""

import re

from django.db import migrations, models

LICENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 .+_()/-]{0,99}")  # common.query.LICENCE_PATTERN when written
OPEN_SOURCE = {
    "apache-2.0", "mit", "bsd", "bsd-2-clause", "bsd-3-clause", "bsd-3-clause-clear", "isc", "mpl-2.0",
    "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1", "lgpl-3.0", "lgpl-lr", "agpl-3.0", "epl-1.0", "epl-2.0",
    "ecl-2.0", "bsl-1.0", "artistic-2.0", "zlib", "unlicense", "cc0-1.0", "pddl", "odc-by", "cc-by-4.0",
    "cc-by-sa-4.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-sa-3.0", "afl-3.0", "osl-3.0", "eupl-1.1",
    "eupl-1.2", "ncsa", "postgresql", "wtfpl",
}  # fmt: skip


def forwards(apps, schema_editor):
    Submission = apps.get_model("leaderboard", "Submission")
    LanguageModel = apps.get_model("arena", "LanguageModel")
    for submission in Submission.objects.filter(open_weights=False).only("pk", "licence"):
        if submission.licence.strip().lower() in OPEN_SOURCE:
            Submission.objects.filter(pk=submission.pk).update(open_weights=True)
    bare = LanguageModel.objects.filter(in_arena=False, licence="")
    for model in bare.only("pk"):
        latest = Submission.objects.filter(language_model_id=model.pk).order_by("-created_at", "-pk").first()
        if latest is None or not LICENCE.fullmatch(latest.licence.strip()):
            continue
        LanguageModel.objects.filter(pk=model.pk, licence="").update(
            licence=latest.licence.strip(), open_weights=latest.open_weights
        )


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0018_score_effective_n"),
        ("arena", "0018_backend_label_vllm"),
    ]

    operations = [
        migrations.AddField(
            model_name="submission",
            name="open_weights",
            field=models.BooleanField(
                default=False,
                help_text="The owner's word: anyone may download the weights (the catalogue shows it).",
            ),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
