"""Code tasks whose programs attack the interpreter or the verdict put the submission in the review queue.

The jail's referee decides every verdict from plain values, so tampering cannot raise a score
(evalcore.jail.verdicts); but a model that emits exit hooks, patched builtins or always-equal
objects was likely trained to cheat, which is for an admin to judge. The engine records, per
document, what the completion spells out and what its process reports about itself
(``tampering``), and the task's protocol counts the documents; here a non-zero count becomes a
system flag (docs/security.md, "Verdicts").
"""

from __future__ import annotations

import logging

from leaderboard.review.services import submission_flag_system

log = logging.getLogger(__name__)


def tampering_reason(task: str, protocol: dict, total: int) -> str | None:
    """The flag's text for one task's protocol, or None when no document's program tampered."""
    found = protocol.get("tampering") or {}
    docs = found.get("docs") or 0
    if not docs:
        return None
    examples = found.get("examples") or [{}]
    first = examples[0]
    what = "; ".join(str(item) for item in (first.get("findings") or [])[:3])
    return (
        f"code execution: {docs} of {total} {task} documents have programs that tamper with the interpreter or the "
        f"verdict (document {first.get('doc_id', '?')}: {what}); verdicts came from plain values and stand"
    )[:1000]


def tampering_flag(submission_id: int, task: str, protocol: dict, total: int) -> str | None:
    """Flag the submission (as "system") when ``protocol`` counts tampering documents; the reason."""
    reason = tampering_reason(task, protocol, total)
    if reason and submission_flag_system(submission_id=submission_id, reason=reason) is not None:
        log.warning("submission %s flagged for review: %s", submission_id, reason)
    return reason
