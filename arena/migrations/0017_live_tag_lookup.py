"""The live board's lookup of a new vote's tags (arena.categories.selectors.tagged_vote_groups, issue 31):
a partial index on (prompt, tagger, protocol) of the tags in a category, read from the index alone, so a
live fit reads the tags of the votes after the refit instead of every tag of each protocol
(bench/live_tagged.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("arena", "0016_rating_history"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="prompttag",
            index=models.Index(
                condition=models.Q(("value", True)),
                fields=["prompt_sha256", "tagger_name", "protocol_sha256"],
                name="prompttag_live_lookup",
            ),
        ),
    ]
