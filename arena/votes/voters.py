"""Anomalous voters and identity-revealing answers: flagging, and the two decisions an admin takes.

``voters_flag`` runs the anomalous-voter test (:func:`evalcore.ratings.voters_test`) on the counted votes
under the latest overall Bradley-Terry snapshot, per session hash and per IP hash, and stores a
:class:`~arena.models.VoterFlag` (pending) for each voter it flags that has no flag yet. An admin then
confirms (the voter's counted votes are set aside with ``excluded_reason="voter_flagged"`` and a refit
is asked for) or dismisses it; an identity-revealing vote is confirmed (``identity_confirmed``: stays
out) or restored (counted again). The audit log of these decisions is the leaderboard's
(``leaderboard.review.services``), which calls these functions inside its own transaction.
"""

from __future__ import annotations

import numpy as np
from django.db import transaction
from django.utils import timezone

from arena.models import Battle, Vote, VoterFlag
from arena.play.base import ArenaError
from arena.ratings import selectors as rating_selectors
from arena.ratings.requests import exclusions_refit_request
from arena.votes import selectors
from arena.votes.filters import IDENTITY_CONFIRMED, IDENTITY_REVEALED, VOTER_FLAGGED
from evalcore.ratings import BASE_RATING, ELO_PER_LOGIT, voters_test

_VOTER_FIELD = {VoterFlag.Kind.SESSION: "session_hash", VoterFlag.Kind.IP: "ip_hash"}


def _theta(snapshot) -> dict[str, float]:
    return {row["model"]: (row["rating"] - BASE_RATING) / ELO_PER_LOGIT for row in snapshot.rows}


def voters_flag(*, alpha: float = 0.01, min_votes: int = 20, seed: int = 0) -> dict:
    """Test every voter with at least ``min_votes`` counted votes; store new flags (pending).

    Returns ``tested`` and ``flagged`` per kind, ``created`` (new flags) and ``reapplied`` (votes of
    already confirmed voters cast since, set aside now). Nothing is tested before the first snapshot.
    """
    reapplied = _confirmed_reapply()
    snapshot = rating_selectors.snapshot_latest("bt", "overall")
    if snapshot is None or not snapshot.rows:
        return {"tested": {}, "flagged": {}, "created": 0, "reapplied": reapplied, "note": "no fit yet"}
    theta = _theta(snapshot)
    models = tuple(theta)
    index = {name: k for k, name in enumerate(models)}
    votes = selectors.votes_counted_columns(voters=True)
    # The fit's index of each catalogue name (-1: a model the snapshot does not rate), by vote.
    position = np.array([index.get(name, -1) for name in votes.names], dtype=np.int64)
    a = position[votes.a] if len(votes) else np.empty(0, dtype=np.int64)
    b = position[votes.b] if len(votes) else np.empty(0, dtype=np.int64)
    outcome = votes.outcome.astype(np.int64)
    tie_rate = float(np.mean(outcome >= 2)) if len(votes) else 0.0
    summary = {"tested": {}, "flagged": {}, "created": 0, "reapplied": reapplied}
    for kind, codes, hashes in (
        (VoterFlag.Kind.SESSION, votes.session_code, votes.session_hashes),
        (VoterFlag.Kind.IP, votes.ip_code, votes.ip_hashes),
    ):
        result = voters_test(
            codes, a, b, outcome, np.array(list(theta.values())), models=models,
            tie_rate=min(tie_rate, 0.99), alpha=alpha, min_votes=min_votes, rng=np.random.default_rng(seed),
        )  # fmt: skip
        rows = result.rows(flagged_only=True)
        summary["tested"][kind.value] = len(result.voters)
        summary["flagged"][kind.value] = len(rows)
        flags = [
            VoterFlag(kind=kind, voter_hash=hashes[int(row["voter"])], votes=row["votes"], p_value=row["p_value"],
                      statistics={k: v for k, v in row.items() if k not in ("voter", "flagged")})
            for row in rows
        ]  # fmt: skip
        before = VoterFlag.objects.count()
        VoterFlag.objects.bulk_create(flags, ignore_conflicts=True)
        summary["created"] += VoterFlag.objects.count() - before
    return summary


def _voter_votes_exclude(kind: str, hashes: list[str]) -> int:
    """Set aside the counted votes of confirmed voters of one kind (and mark their battles); how many."""
    if not hashes:
        return 0
    votes = Vote.objects.filter(counted=True, **{f"{_VOTER_FIELD[VoterFlag.Kind(kind)]}__in": hashes})
    battle_ids = list(votes.values_list("battle_id", flat=True))
    n = votes.update(counted=False, excluded_reason=VOTER_FLAGGED)
    Battle.objects.filter(pk__in=battle_ids).update(excluded_reason=VOTER_FLAGGED)
    return n


def _confirmed_reapply() -> int:
    """Votes that confirmed voters cast after their confirmation leave the counted votes too."""
    confirmed = VoterFlag.objects.filter(status=VoterFlag.Status.CONFIRMED)
    total = 0
    for kind in VoterFlag.Kind.values:
        total += _voter_votes_exclude(kind, list(confirmed.filter(kind=kind).values_list("voter_hash", flat=True)))
    if total:
        transaction.on_commit(exclusions_refit_request)
    return total


def voter_flag_decide(flag_id: int, *, confirm: bool) -> tuple[VoterFlag, int]:
    """Confirm (votes set aside, refit asked for) or dismiss a pending flag; (flag, votes set aside).

    Call inside a transaction (the review service's); a flag already decided is refused (409).
    """
    flag = VoterFlag.objects.select_for_update().filter(pk=flag_id).first()
    if flag is None:
        raise ArenaError("No such flagged voter.", status=404)
    if flag.status != VoterFlag.Status.PENDING:
        raise ArenaError(f"This voter was already decided ({flag.get_status_display()}).", status=409)
    flag.status = VoterFlag.Status.CONFIRMED if confirm else VoterFlag.Status.DISMISSED
    flag.decided_at = timezone.now()
    flag.save(update_fields=["status", "decided_at", "updated_at"])
    excluded = _voter_votes_exclude(flag.kind, [flag.voter_hash]) if confirm else 0
    if excluded:
        transaction.on_commit(exclusions_refit_request)
    return flag, excluded


def vote_identity_decide(vote_id: int, *, restore: bool) -> Vote:
    """Keep an identity-revealing vote out for good (``identity_confirmed``) or count it again.

    Call inside a transaction; a vote not waiting for this decision is refused (404 or 409).
    """
    vote = Vote.objects.select_for_update().filter(pk=vote_id).first()
    if vote is None:
        raise ArenaError("No such vote.", status=404)
    if vote.excluded_reason != IDENTITY_REVEALED:
        raise ArenaError("This vote is not waiting for an identity decision (already decided?).", status=409)
    vote.counted = restore
    vote.excluded_reason = "" if restore else IDENTITY_CONFIRMED
    vote.save(update_fields=["counted", "excluded_reason"])
    Battle.objects.filter(pk=vote.battle_id).update(excluded_reason=vote.excluded_reason)
    if restore:
        transaction.on_commit(exclusions_refit_request)
    return vote
