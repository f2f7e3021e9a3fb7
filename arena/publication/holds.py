"""Holding battles back from publication: the moderation step's tags, voters' reports, staff decisions.

A voted battle is published only once moderated (``Battle.moderation``) and while it has no hold
that is ``held`` or ``kept`` (arena.publication.selectors.battles_published). The refit moderates every voted
battle first (:func:`battles_moderate`), so whatever a new snapshot covers has been looked at.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from arena.models import Battle, BattleHold, Turn
from arena.play.base import ArenaError
from arena.publication.moderation import MODERATION_VERSION, verdict

log = logging.getLogger(__name__)
BATCH = 500
MAX_REASON_CHARS = 500
MAX_REPORTS = 50  # per battle; later ones are refused


def battles_moderate(*, limit: int | None = None) -> dict:
    """Moderate every voted battle not yet moderated by this version; tagged ones get a hold.

    ``{"moderated": n, "held": m}``. A battle staff already released stays released."""
    stale = (
        Battle.objects.filter(vote__isnull=False)
        .exclude(moderation__version=MODERATION_VERSION)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    ids = list(stale[:limit] if limit is not None else stale)
    moderated = held = 0
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        prompts: dict[int, list[str]] = {pk: [] for pk in chunk}
        for battle_id, prompt in Turn.objects.filter(battle_id__in=chunk).order_by("index").values_list("battle_id", "prompt"):
            prompts[battle_id].append(prompt)
        with transaction.atomic():
            battles = list(Battle.objects.filter(pk__in=chunk).only("pk", "moderation"))
            for battle in battles:
                battle.moderation = verdict(prompts[battle.pk])
                if battle.moderation["flagged"]:
                    _, made = BattleHold.objects.get_or_create(
                        battle_id=battle.pk,
                        defaults={"reason": BattleHold.Reason.MODERATION, "details": {"moderation": battle.moderation}},
                    )
                    held += made
            moderated += Battle.objects.bulk_update(battles, ["moderation"])
    if moderated:
        log.info("moderated %d battles (%s): %d held for review", moderated, MODERATION_VERSION, held)
    return {"moderated": moderated, "held": held}


def battle_report(*, public_id, session_hash: str, reason: object) -> BattleHold:
    """The voter reports their own battle: it is held back from publication until staff decide."""
    reason = " ".join(str(reason or "").split())[:MAX_REASON_CHARS]
    if not reason:
        raise ArenaError("Say why you report this battle (a reason is required).", status=400)
    with transaction.atomic():
        battle = Battle.objects.select_for_update().filter(public_id=public_id, session_hash=session_hash).first()
        if battle is None:
            raise ArenaError("No such battle.", status=404)
        hold, _ = BattleHold.objects.select_for_update().get_or_create(
            battle=battle, defaults={"reason": BattleHold.Reason.REPORT}
        )
        reports = list(hold.details.get("reports", []))
        if any(r.get("session") == session_hash for r in reports):
            raise ArenaError("You already reported this battle; staff will look at it.", status=409)
        if len(reports) >= MAX_REPORTS:
            raise ArenaError("This battle has been reported many times already; staff will look at it.", status=409)
        reports.append({"reason": reason, "at": timezone.now().isoformat(), "session": session_hash})
        hold.details = {**hold.details, "reports": reports}
        hold.status = BattleHold.Status.HELD  # a released battle is held again until reviewed
        hold.decided_at = None
        hold.save()
    return hold


def battle_hold_decide(hold_id: int, *, release: bool) -> BattleHold:
    """Release a held battle (published as usual) or keep it held for good. Call inside a transaction."""
    hold = BattleHold.objects.select_for_update().filter(pk=hold_id).first()
    if hold is None:
        raise ArenaError("No such held battle.", status=404)
    if hold.status != BattleHold.Status.HELD:
        raise ArenaError(f"This battle was already decided ({hold.get_status_display()}).", status=409)
    hold.status = BattleHold.Status.RELEASED if release else BattleHold.Status.KEPT
    hold.decided_at = timezone.now()
    hold.save(update_fields=["status", "decided_at", "updated_at"])
    return hold
