"""Tagging votes' first prompts with the configured category protocols, and staff checks of the tags.

:func:`votes_categorize` is one batch of the tagging queue (``arena.tasks.categories_tag`` calls it in a
loop): it gives every new vote its :class:`~arena.models.VoteCategorization` row (its first prompt's
hash), claims up to ``batch`` pending rows (counting the attempt), reads the tags already stored for
their prompts under each protocol (the cache: keyed by tagger, protocol hash and prompt hash) and runs
the tagger on the rest only, in one batched call per protocol, storing each protocol's tags as soon as it
finishes. A worker killed mid-batch loses only the protocol it was running: the rows stay pending and
the next run (the redelivered task, the next vote's, or beat's) finds every stored tag in the cache. A
row whose prompt still fails after ``max_attempts`` runs is marked failed with the error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q

from arena.categories import tagger as categories
from arena.categories.selectors import tag_reviewable
from arena.models import PromptTag, TagReview, Turn, Vote, VoteCategorization
from arena.play.base import ArenaError
from arena.play.dispatch import categories_tag_schedule
from evalcore.categories import prompt_sha256, tag_prompts, tagger_key

log = logging.getLogger(__name__)
MAX_ERROR_CHARS = 500
NO_PROMPT = "the battle has no first prompt"
LATE_IDS = 10_000  # default of ARENA_CATEGORY_LATE_IDS: how many ids late a vote may commit and still be enlisted


def late_ids() -> int:
    """``ARENA_CATEGORY_LATE_IDS`` (default :data:`LATE_IDS`; 0: no limit)."""
    value = getattr(settings, "ARENA_CATEGORY_LATE_IDS", LATE_IDS)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArenaError(f"ARENA_CATEGORY_LATE_IDS must be a whole number >= 0, got {value!r}", status=500)
    return value


def _unlisted():
    """Votes without a categorization row, looked for only above the newest enlisted vote less
    ``ARENA_CATEGORY_LATE_IDS`` (votes are enlisted in id order; a vote committing that many ids late is
    the only one missed): an index range, not an anti-join over every vote (10M at scale) per batch.
    With 0, every vote is looked at (the anti-join: for a small arena, or to catch up once)."""
    newest = VoteCategorization.objects.aggregate(top=Max("vote_id"))["top"]
    votes = Vote.objects.filter(categorization__isnull=True)
    window = late_ids()
    return votes if newest is None or window == 0 else votes.filter(id__gt=newest - window)


def votes_enlist(*, limit: int) -> int:
    """Give up to ``limit`` votes without one a pending categorization row (their first prompt's hash);
    how many were added. A vote whose battle has no first turn (never the case for a cast vote) gets a
    failed row saying so, so it is not looked at again."""
    votes = list(_unlisted().order_by("id").values_list("id", "battle_id")[:limit])
    if not votes:
        return 0
    prompts = dict(
        Turn.objects.filter(battle_id__in=[b for _, b in votes], index=0).values_list("battle_id", "prompt")
    )
    rows = [
        VoteCategorization(vote_id=vote_id, prompt_sha256=prompt_sha256(prompts[battle_id]))
        if battle_id in prompts
        else VoteCategorization(vote_id=vote_id, status=VoteCategorization.Status.FAILED, error=NO_PROMPT)
        for vote_id, battle_id in votes
    ]
    return len(VoteCategorization.objects.bulk_create(rows, ignore_conflicts=True))


def _claim(batch: int) -> list[VoteCategorization]:
    """Up to ``batch`` pending rows, oldest first, their attempt counted (rows another worker holds are
    skipped on PostgreSQL)."""
    with transaction.atomic():
        rows = list(
            VoteCategorization.objects.select_for_update(skip_locked=True)
            .filter(status=VoteCategorization.Status.PENDING)
            .order_by("id")[:batch]
        )
        for row in rows:
            row.attempts += 1
        VoteCategorization.objects.bulk_update(rows, ["attempts"])
    return rows


def _first_prompts(rows: list[VoteCategorization]) -> dict[str, str]:
    """Prompt hash -> the first prompt's text, for the claimed rows."""
    found = Turn.objects.filter(index=0, battle__vote__id__in=[r.vote_id for r in rows]).values_list(
        "prompt", flat=True
    )
    return {prompt_sha256(text): text for text in found}


def votes_categorize(load_tagger: Callable[[], object], *, batch: int = 32, max_attempts: int = 3) -> dict:
    """One batch of the tagging queue (see the module docs). ``load_tagger()`` returns the evalcore
    backend of the configured tagger (the worker's pool keeps it loaded); it is called only when a
    batch has work. Returns counts: ``claimed``, ``tagged`` (model verdicts), ``cached`` (verdicts read
    from the stored tags), ``failed_tags``, ``done``, ``failed`` (rows given up), ``enlisted``."""
    protocols = categories.category_protocols()
    name = categories.tagger_name()
    summary = {
        "claimed": 0,
        "tagged": 0,
        "cached": 0,
        "failed_tags": 0,
        "done": 0,
        "failed": 0,
        "enlisted": 0,
    }
    if not name or not protocols:
        return summary
    summary["enlisted"] = votes_enlist(limit=max(batch * 4, 100))
    rows = _claim(batch)
    summary["claimed"] = len(rows)
    if not rows:
        return summary
    backend = load_tagger()
    key = tagger_key(backend)[:300]  # the column's width (an endpoint's key holds its URL)
    texts = _first_prompts(rows)
    errors: dict[str, str] = {}
    have: dict[str, set[str]] = {sha: set() for sha in texts}  # prompt hash -> protocol hashes tagged
    for protocol in protocols:
        stored = set(
            PromptTag.objects.filter(tagger=key, protocol_sha256=protocol.sha256, prompt_sha256__in=list(texts))
            .values_list("prompt_sha256", flat=True)
        )  # fmt: skip
        summary["cached"] += len(stored)
        missing = [sha for sha in texts if sha not in stored]
        for sha in stored:
            have[sha].add(protocol.sha256)
        if not missing:
            continue
        tags = tag_prompts(backend, protocol, [texts[sha] for sha in missing])
        new = []
        for tag in tags:
            if not tag.ok:
                summary["failed_tags"] += 1
                errors.setdefault(tag.prompt_sha256, f"{protocol.name}: {tag.error}"[:MAX_ERROR_CHARS])
                continue
            new.append(
                PromptTag(
                    prompt_sha256=tag.prompt_sha256,
                    category=protocol.category,
                    protocol=protocol.name,
                    protocol_version=protocol.version,
                    protocol_sha256=protocol.sha256,
                    tagger=key,
                    tagger_name=name,
                    value=bool(tag.value),
                    score=int(tag.score or 0),
                    criteria={"answers": tag.criteria, "p_yes": tag.p_yes, "raw": tag.raw},
                )  # fmt: skip
            )
            have[tag.prompt_sha256].add(protocol.sha256)
        PromptTag.objects.bulk_create(new, ignore_conflicts=True)  # stored now: a kill after this keeps them
        summary["tagged"] += len(new)
    wanted = {p.sha256 for p in protocols}
    for row in rows:
        if have.get(row.prompt_sha256, set()) >= wanted:
            row.status, row.error = VoteCategorization.Status.DONE, ""
            summary["done"] += 1
        else:
            row.error = errors.get(row.prompt_sha256, "the first prompt was not found")
            if row.attempts >= max_attempts:
                row.status = VoteCategorization.Status.FAILED
                summary["failed"] += 1
    VoteCategorization.objects.bulk_update(rows, ["status", "error", "updated_at"])
    return summary


def categorization_pending() -> bool:
    """Whether votes wait for tags: pending rows, or votes without a row."""
    return (
        VoteCategorization.objects.filter(status=VoteCategorization.Status.PENDING).exists()
        or _unlisted().exists()
    )


def categorizations_retry(ids: Iterable[int] | None = None) -> int:
    """Put failed rows back in the queue (after fixing the tagger): every one, or those of ``ids`` (the
    admin's selection; rows not failed are left as they are); how many. A tagging run is asked for
    when any went back (:func:`arena.play.dispatch.categories_tag_schedule`, after the commit)."""
    failed = VoteCategorization.objects.filter(status=VoteCategorization.Status.FAILED)
    if ids is not None:
        failed = failed.filter(pk__in=list(ids))
    count = failed.update(status=VoteCategorization.Status.PENDING, attempts=0, error="")
    if count:
        transaction.on_commit(categories_tag_schedule)
    return count


def tag_review_record(*, tag_id: int, reviewer, value: object) -> TagReview:
    """Record a staff member's check of a tag: ``value`` True (in the category) or False. A second check
    by the same person replaces their first. Only tags of published prompts may be checked."""
    if not isinstance(value, bool):
        raise ArenaError("Say whether the prompt is in the category: yes or no.")
    if reviewer is None or not getattr(reviewer, "is_staff", False):
        raise ArenaError("Only staff check tags.", status=403)
    tag = tag_reviewable(tag_id)
    if tag is None:
        raise ArenaError("No such tag among published prompts.", status=404)
    try:
        with transaction.atomic():
            review, _ = TagReview.objects.update_or_create(
                tag=tag, reviewer=reviewer, defaults={"value": value}
            )
    except IntegrityError:  # a concurrent check by the same person: theirs stands, read it back
        review = TagReview.objects.get(Q(tag=tag) & Q(reviewer=reviewer))
    return review
