"""The public text of a turn: its prompt and answers through :func:`evalcore.privacy.redact.redact_together`.

Every public path for battle texts (``/api/battles/``, data releases) reads them from here. A turn
keeps its redaction in ``Turn.redacted`` (``{"version", "prompt", "answer_a", "answer_b", "found"}``);
one made by another redactor version counts as missing. A missing redaction is computed on the spot
(and not stored: readers don't write), so nothing is ever served unredacted; the refit task stores
them for newly published battles (:func:`arena.services.redaction.published_redact`).
"""

from __future__ import annotations

from evalcore.privacy.redact import REDACTOR_VERSION, redact_together

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
