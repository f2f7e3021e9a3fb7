"""Reading prompt categories: which votes each tagged category holds (the refit's masks), a sample of tags
for staff to check (published battles only, as the public sees their text), and the tagger's agreement
with staff per category (docs/categories.md)."""

from __future__ import annotations

import random

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Subquery

from arena import categories
from arena.models import PromptTag, RatingSnapshot, TagReview, Turn, Vote, VoteCategorization
from arena.redaction import turn_public
from arena.selectors import VoteColumns, battles_published
from evalcore.categories import agreement

SAMPLE_SIZE = 20


def tags_fingerprint() -> str:
    """Changes whenever a tag or a vote's categorization is written (part of a refit's fingerprint, so
    a refit follows new tags even when the votes did not change)."""
    tags = PromptTag.objects.aggregate(n=Count("id"), top=Max("id"))
    done = VoteCategorization.objects.filter(status=VoteCategorization.Status.DONE).count()
    return f"{tags['n']}:{tags['top']}:{done}"


def tagged_vote_ids(protocol_sha256: str, tagger_name: str) -> np.ndarray:
    """Ids (int64, sorted) of the votes whose first prompt the tagger put in the protocol's category."""
    prompts = PromptTag.objects.filter(protocol_sha256=protocol_sha256, tagger_name=tagger_name, value=True)
    ids = VoteCategorization.objects.filter(prompt_sha256__in=prompts.values("prompt_sha256")).values_list(
        "vote_id", flat=True
    )
    return np.sort(np.fromiter(ids.iterator(chunk_size=50_000), dtype=np.int64))


def tagged_vote_groups(after_id: int, outcomes: dict[str, int], unknown: int) -> dict[str, np.ndarray]:
    """The live board's votes of each configured tagged category: counted votes with an id above
    ``after_id`` whose first prompt the tagger has put in the category by now, grouped in SQL, as rows
    (model_a id, model_b id, outcome code from ``outcomes``, ``unknown`` for another winner, votes),
    int64, shape (groups, 4). Empty when tagging is off.

    One statement for every protocol (:func:`tagged_groups_sql`): the votes after the refit and their
    categorisations (both ranges of an index on the vote id), each prompt's tags looked up in the index
    ``prompttag_live_lookup`` (prompt, tagger, protocol; tags in the category only), so a live fit reads
    what the new votes need, not every categorisation once per protocol as the semi-join per protocol
    before issue 31 did (bench/live_tagged.py)."""
    name = categories.tagger_name()
    protocols = categories.category_protocols()
    if not name or not protocols:
        return {}
    sql, params = tagged_groups_sql(after_id, [p.sha256 for p in protocols], name)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        groups = cursor.fetchall()
    found: dict[str, list] = {p.sha256: [] for p in protocols}
    for sha, a, b, winner, n in groups:
        found[sha].append((a, b, outcomes.get(winner, unknown), n))
    return {p.category: np.array(found[p.sha256], dtype=np.int64).reshape(-1, 4) for p in protocols}


def tagged_groups_sql(after_id: int, protocol_sha256s: list[str], tagger_name: str) -> tuple[str, list]:
    """The statement behind :func:`tagged_vote_groups` and its parameters: (protocol hash, model_a id,
    model_b id, winner, votes) for the counted votes above ``after_id`` whose prompt ``tagger_name`` put
    in a protocol's category. A vote counts once per protocol even where two tagger keys of one configured
    tagger (weights changed at the same path) both tagged its prompt."""
    vote, cat, tag = Vote._meta.db_table, VoteCategorization._meta.db_table, PromptTag._meta.db_table
    sql = (
        f"SELECT t.protocol_sha256, v.model_a_id, v.model_b_id, v.winner, count(DISTINCT v.id) FROM {vote} v"
        f" JOIN {cat} c ON c.vote_id = v.id"
        f" JOIN {tag} t ON t.prompt_sha256 = c.prompt_sha256 AND t.tagger_name = %s AND t.value"
        " AND t.protocol_sha256 IN (" + ", ".join(["%s"] * len(protocol_sha256s)) + ")"
        " WHERE v.counted AND v.id > %s AND c.vote_id > %s GROUP BY 1, 2, 3, 4"
    )  # c.vote_id's range too: a range of its index, not a hash of every vote's categorization
    return sql, [tagger_name, *protocol_sha256s, after_id, after_id]


def tag_masks(votes: VoteColumns) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """Each configured category's votes as a mask over ``votes`` (bool, shape (n,)), and what made the tags
    (protocol name, version and hash, tagger) per category, for the snapshots' settings. Empty when
    tagging is off or ``votes`` carry no vote ids."""
    name = categories.tagger_name()
    if not name or votes.vote_id is None:
        return {}, {}
    masks, made_by = {}, {}
    for protocol in categories.category_protocols():
        ids = tagged_vote_ids(protocol.sha256, name)
        masks[protocol.category] = np.isin(votes.vote_id, ids, assume_unique=False)
        made_by[protocol.category] = {
            "protocol": protocol.name, "protocol_version": protocol.version,
            "protocol_sha256": protocol.sha256, "tagger": name,
            "threshold": protocol.threshold, "criteria": [c.name for c in protocol.criteria],
        }  # fmt: skip
    return masks, made_by


def tags_sample(category: str, *, size: int = SAMPLE_SIZE, seed: int | None = None) -> list[dict]:
    """Up to ``size`` tags of ``category`` drawn at random among the prompts of published battles (no one
    on staff reads a prompt before the public may), each with the prompt as published (redacted),
    the tag and the reviews it already has; only tags of the configured protocol and tagger when the
    category is configured. ``seed``: the draw (None: a fresh one)."""
    delay = int(settings.ARENA_PUBLISH_DELAY_S)
    published = battles_published(delay_s=delay).values("vote__id")
    shas = VoteCategorization.objects.filter(vote_id__in=published).values("prompt_sha256")
    tags = PromptTag.objects.filter(category=category, prompt_sha256__in=shas)
    protocol = next((p for p in categories.category_protocols() if p.category == category), None)
    if protocol is not None:  # the tags the board's category is made of: this protocol, this tagger
        tags = tags.filter(protocol_sha256=protocol.sha256, tagger_name=categories.tagger_name())
    tag_ids = list(tags.values_list("id", flat=True))
    chosen = random.Random(seed).sample(sorted(tag_ids), min(size, len(tag_ids)))
    tags = {t.id: t for t in PromptTag.objects.filter(id__in=chosen)}
    reviews: dict[int, list] = {}
    for review in TagReview.objects.filter(tag_id__in=chosen).select_related("reviewer"):
        reviews.setdefault(review.tag_id, []).append(review)
    out = []
    for tag_id in chosen:
        tag = tags[tag_id]
        turn = _published_first_turn(tag.prompt_sha256, published)
        if turn is None:
            continue
        out.append({"tag": tag, "prompt": turn_public(turn)["prompt"], "reviews": reviews.get(tag_id, [])})
    return out


def _published_first_turn(prompt_sha256: str, published) -> Turn | None:
    vote_ids = VoteCategorization.objects.filter(prompt_sha256=prompt_sha256, vote_id__in=published).values(
        "vote_id"
    )
    return Turn.objects.filter(index=0, battle__vote__id__in=vote_ids).order_by("battle_id").first()


def tag_reviewable(tag_id: int) -> PromptTag | None:
    """The tag, when its prompt belongs to a published battle (what staff may check); else None."""
    published = battles_published(delay_s=int(settings.ARENA_PUBLISH_DELAY_S)).values("vote__id")
    shas = VoteCategorization.objects.filter(vote_id__in=published).values("prompt_sha256")
    return PromptTag.objects.filter(id=tag_id, prompt_sha256__in=shas).first()


def category_agreement(category: str) -> dict:
    """The tagger's agreement with staff on ``category`` (:func:`evalcore.categories.agreement`: share,
    Wilson interval, confusion cells) over every checked tag of the configured protocol, each staff
    check counted once, with ``protocol`` and ``protocol_version``."""
    protocol = next((p for p in categories.category_protocols() if p.category == category), None)
    reviews = TagReview.objects.filter(tag__category=category)
    if protocol is not None:
        reviews = reviews.filter(tag__protocol_sha256=protocol.sha256)
    pairs = list(reviews.values_list("tag__value", "value"))
    out = agreement(pairs)
    out["protocol"] = protocol.name if protocol else ""
    out["protocol_version"] = protocol.version if protocol else ""
    return out


def review_stamp(category: str) -> tuple:
    """Changes whenever a check of ``category``'s tags is recorded (the board's cache key)."""
    found = TagReview.objects.filter(tag__category=category).aggregate(n=Count("id"), top=Max("id"))
    return found["n"], found["top"]


def tagged_categories() -> list[str]:
    """The configured categories, in the order of ``ARENA_CATEGORY_PROTOCOLS``."""
    return [p.category for p in categories.category_protocols()]


def category_vote_counts() -> dict[str, int]:
    """Each category's counted votes in its latest Bradley-Terry snapshot (the board's selector shows them),
    ``overall`` first, then by name: one query."""
    bt = RatingSnapshot.objects.filter(method=RatingSnapshot.Method.BT)
    latest = bt.values("category").annotate(top=Max("id")).values("top")
    found = dict(RatingSnapshot.objects.filter(id__in=Subquery(latest)).values_list("category", "vote_count"))
    return {c: found[c] for c in sorted(found, key=lambda c: (c != "overall", c))}
