"""What a refit leaves out of the counted votes, and how many: the integrity summary on every snapshot.

* **Identity-revealing answers** are never counted (``Vote.counted`` is False with
  ``excluded_reason="identity_revealed"``, set when the vote is cast): only counted here.
* **Confirmed anomalous voters**: their votes were set aside (``excluded_reason="voter_flagged"``) when
  an admin confirmed the flag: counted here, and :func:`votes_before_voter_exclusion` gives the votes
  as they were before, for the "before and after" fit on the board.
* **Past the daily cap**: a voter's votes beyond ``ARENA_DAILY_VOTE_CAP`` in one day (UTC) are kept but not
  counted (``excluded_reason="daily_cap"``, set when the vote is cast): only counted here.
* **Duplicate prompts**: a prompt repeated beyond the 99.9th percentile of prompt counts counts once
  (:func:`evalcore.ratings.duplicate_prompt_mask`); dropped here, at fit time, so the stored votes stay.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from django.conf import settings
from django.db.models import Count

from arena.models import Vote, VoterFlag
from arena.votes.selectors import VoteColumns, votes_counted_columns
from evalcore.ratings import duplicate_prompt_mask

IDENTITY_REVEALED = "identity_revealed"  # set when the vote is cast; waits for an admin in the review queue
IDENTITY_CONFIRMED = "identity_confirmed"  # an admin confirmed the exclusion
VOTER_FLAGGED = "voter_flagged"
DAILY_CAP = "daily_cap"  # past the voter's ARENA_DAILY_VOTE_CAP votes of the day (UTC): kept, not counted
DUPLICATE_PERCENTILE = 99.9


def columns_subset(votes: VoteColumns, keep: np.ndarray) -> VoteColumns:
    """The votes where ``keep`` (bool, shape (n,)) is True, in the same order."""
    idx = np.flatnonzero(keep)
    if idx.size == len(votes):
        return votes
    arrays = {}
    for name in ("a", "b", "outcome", "tstamp", "turn_count", "prompt_tokens", "language", "style_a", "style_b",
                 "prompt_code", "session_code", "ip_code", "language_code", "vote_id"):  # fmt: skip
        value = getattr(votes, name)
        arrays[name] = None if value is None else value[idx]
    return replace(votes, **arrays)


def votes_dedup(votes: VoteColumns, *, percentile: float = DUPLICATE_PERCENTILE) -> tuple[VoteColumns, dict]:
    """The votes with over-frequent prompts counted once, and what was dropped."""
    codes = votes.prompt_code if votes.prompt_code is not None else np.full(len(votes), -1, dtype=np.int64)
    dup = duplicate_prompt_mask(codes, percentile=percentile)
    summary = {
        "duplicate_prompts_dropped": dup.dropped,
        "duplicate_prompts": dup.prompts,
        "duplicate_percentile": dup.percentile,
        "duplicate_threshold": dup.threshold,
    }
    return columns_subset(votes, dup.keep), summary


def excluded_counts() -> dict[str, int]:
    """Votes kept but not rated, by reason, and voters whose exclusion an admin confirmed."""
    by_reason = dict(
        Vote.objects.filter(counted=False).values_list("excluded_reason").annotate(n=Count("id")).order_by()
    )
    return {
        "identity_revealed": int(by_reason.get(IDENTITY_REVEALED, 0) + by_reason.get(IDENTITY_CONFIRMED, 0)),
        "voter_flagged": int(by_reason.get(VOTER_FLAGGED, 0)),
        "voters_confirmed": VoterFlag.objects.filter(status=VoterFlag.Status.CONFIRMED).count(),
        "daily_cap": int(by_reason.get(DAILY_CAP, 0)),
        "daily_vote_cap": int(getattr(settings, "ARENA_DAILY_VOTE_CAP", 0) or 0),
    }


def excluded_fingerprint() -> str:
    """Changes whenever votes are set aside or restored (part of a refit's fingerprint, so the counts on
    the snapshot follow even when the counted votes did not change)."""
    return str(Vote.objects.filter(counted=False).count())


def votes_filtered(
    votes: VoteColumns, *, percentile: float = DUPLICATE_PERCENTILE
) -> tuple[VoteColumns, dict]:
    """Counted votes as a refit fits them (duplicate prompts once) and the integrity summary."""
    kept, summary = votes_dedup(votes, percentile=percentile)
    return kept, {**excluded_counts(), **summary}


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def integrity_note(summary: dict) -> str | None:
    """One sentence for the board's notes, or None when nothing was left out."""
    parts = []
    if summary.get("identity_revealed"):
        parts.append(f"{_n(summary['identity_revealed'], 'vote')} on answers that named a model")
    if summary.get("voter_flagged"):
        voters = _n(summary.get("voters_confirmed", 0), "voter")
        parts.append(f"{_n(summary['voter_flagged'], 'vote')} of {voters} an admin confirmed as anomalous")
    if summary.get("daily_cap"):
        cap = summary.get("daily_vote_cap")
        limit = f" of {_n(cap, 'vote')} per voter a day" if cap else ""
        parts.append(f"{_n(summary['daily_cap'], 'vote')} past the daily cap{limit}")
    if summary.get("duplicate_prompts_dropped"):
        parts.append(
            f"{_n(summary['duplicate_prompts_dropped'], 'repeat')} of {_n(summary['duplicate_prompts'], 'prompt')} "
            f"sent more often than the {summary['duplicate_percentile']:g}th percentile (each counted once)"
        )
    return ("Left out of this fit: " + "; ".join(parts) + ".") if parts else None


def votes_before_voter_exclusion(*, percentile: float = DUPLICATE_PERCENTILE) -> VoteColumns | None:
    """Counted votes plus those of confirmed anomalous voters (deduplicated the same way), or None
    when no vote was set aside for that reason."""
    if not Vote.objects.filter(counted=False, excluded_reason=VOTER_FLAGGED).exists():  # (counted, ...) index
        return None
    votes = votes_counted_columns(also_excluded=(VOTER_FLAGGED,))
    return votes_dedup(votes, percentile=percentile)[0]
