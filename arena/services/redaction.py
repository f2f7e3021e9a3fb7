"""Store the redactions of published battles' turns (arena/redaction.py), so readers find them ready."""

from __future__ import annotations

import logging

from django.conf import settings

from arena import selectors
from arena.models import Turn
from arena.redaction import redaction_compute
from evalcore.privacy.redact import REDACTOR_VERSION

log = logging.getLogger(__name__)
BATCH = 200


def published_redact(*, everything: bool = False, limit: int | None = None) -> int:
    """Redact (again) every turn of a published battle whose stored redaction is missing or was made by
    another redactor version; ``everything``: every turn of every voted battle. How many were written."""
    if everything:
        battles = selectors.battles_voted()
    else:
        battles = selectors.battles_published(delay_s=int(settings.ARENA_PUBLISH_DELAY_S))
    stale = (
        Turn.objects.filter(battle__in=battles.values("pk"))
        .exclude(redacted__version=REDACTOR_VERSION)
        .order_by("pk")
        .only("pk", "prompt", "answer_a", "answer_b", "redacted")
    )
    if limit is not None:
        stale = stale[:limit]
    written, batch = 0, []
    for turn in stale.iterator(chunk_size=BATCH):
        turn.redacted = redaction_compute(turn)
        batch.append(turn)
        if len(batch) >= BATCH:
            written += Turn.objects.bulk_update(batch, ["redacted"])
            batch = []
    if batch:
        written += Turn.objects.bulk_update(batch, ["redacted"])
    if written:
        log.info("redacted %d turns of published battles (%s)", written, REDACTOR_VERSION)
    return written
