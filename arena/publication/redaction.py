"""The public text of a turn: its prompt and answers through :func:`evalcore.privacy.redact.redact_together`.

Every public path for battle texts (``/api/battles/``, data releases) reads them from here. A turn
keeps its redaction in ``Turn.redacted`` (``{"version", "prompt", "answer_a", "answer_b", "found"}``);
one made by another redactor version counts as missing. A missing redaction is computed on the spot
(and not stored: readers don't write), so nothing is ever served unredacted; the refit task stores
them for newly published battles (:func:`published_redact`).
"""

from __future__ import annotations

import logging

from django.conf import settings

from arena.models import Turn
from arena.publication import selectors as publication_selectors
from evalcore.privacy.redact import REDACTOR_VERSION, redact_together

log = logging.getLogger(__name__)
BATCH = 200

FIELDS = ("prompt", "answer_a", "answer_b")


def redaction_compute(turn) -> dict:
    """A fresh redaction of ``turn``'s prompt and answers, together (what is found in one is redacted where the
    others repeat it), with the redactor's version and what it found."""
    out: dict = {"version": REDACTOR_VERSION, "found": {}}
    results = redact_together([getattr(turn, name) or "" for name in FIELDS])
    for name, result in zip(FIELDS, results):
        out[name] = result.text
        for kind, count in result.found.items():
            out["found"][kind] = out["found"].get(kind, 0) + count
    return out


def redaction_current(turn) -> bool:
    stored = turn.redacted
    return isinstance(stored, dict) and stored.get("version") == REDACTOR_VERSION and all(
        isinstance(stored.get(name), str) for name in FIELDS
    )


def turn_public(turn) -> dict:
    """``{"prompt", "answer_a", "answer_b"}`` as the public may see them."""
    data = turn.redacted if redaction_current(turn) else redaction_compute(turn)
    return {name: data[name] for name in FIELDS}


def published_redact(*, everything: bool = False, limit: int | None = None) -> int:
    """Redact (again) every turn of a published battle whose stored redaction is missing or was made by
    another redactor version; ``everything``: every turn of every voted battle. How many were written."""
    if everything:
        battles = publication_selectors.battles_voted()
    else:
        battles = publication_selectors.battles_published(delay_s=int(settings.ARENA_PUBLISH_DELAY_S))
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
