"""A prompt tag row as the tagging queue stores it, for the tests of the tagged-vote reads."""

from __future__ import annotations

from arena.categories import tagger as categories
from arena.models import PromptTag


def tag_row(digest, protocol, *, value=True, tagger="hf:key-1", name=None):
    PromptTag.objects.create(
        prompt_sha256=digest, category=protocol.category, protocol=protocol.name,
        protocol_version=protocol.version, protocol_sha256=protocol.sha256, tagger=tagger,
        tagger_name=categories.tagger_name() if name is None else name, value=value, score=int(value),
    )  # fmt: skip
