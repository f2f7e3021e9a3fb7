"""Reading prompt categories: which votes each tagged category holds (the refit's masks), a sample of tags
for staff to check (published battles only, as the public sees their text), and the tagger's agreement
with staff per category (docs/categories.md)."""

from __future__ import annotations

import random

import numpy as np
import psycopg
from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Q

from arena.categories import tagger as categories
from arena.models import PromptTag, TagReview, Turn, Vote, VoteCategorization
from arena.publication.redaction import turn_public
from arena.publication.selectors import battles_published
from arena.votes.selectors import VoteColumns
from evalcore.categories import agreement

SAMPLE_SIZE = 20


def tags_fingerprint() -> str:
    """Changes whenever a tag or a vote's categorization is written (part of a refit's fingerprint, so
    a refit follows new tags even when the votes did not change)."""
    tags = PromptTag.objects.aggregate(n=Count("id"), top=Max("id"))
    done = VoteCategorization.objects.filter(status=VoteCategorization.Status.DONE).count()
    return f"{tags['n']}:{tags['top']}:{done}"


def tagged_vote_ids(protocol_sha256: str, tagger_name: str) -> np.ndarray:
    """Ids (int64, sorted) of the votes whose first prompt the tagger put in the protocol's category: one
    protocol's semi-join (the refit read this once per protocol before issue 31; :func:`tag_masks` reads
    every protocol in one statement now, :func:`tagged_vote_masks`)."""
    prompts = PromptTag.objects.filter(protocol_sha256=protocol_sha256, tagger_name=tagger_name, value=True)
    ids = VoteCategorization.objects.filter(prompt_sha256__in=prompts.values("prompt_sha256")).values_list(
        "vote_id", flat=True
    )
    return np.sort(np.fromiter(ids.iterator(chunk_size=50_000), dtype=np.int64))


MASK_BITS = 62  # protocols per statement of tagged_vote_masks: bits of a signed 64-bit mask


def tagged_masks_sql(protocol_sha256s: list[str], tagger_name: str, *, vendor: str) -> tuple[str, list]:
    """The statement behind :func:`tagged_vote_masks` and its parameters: (vote id, mask) for every
    categorised vote whose prompt ``tagger_name`` put in at least one of the protocols' categories, bit k of
    the mask set for ``protocol_sha256s[k]`` (distinct hashes, at most ``MASK_BITS``). Each prompt's mask is
    aggregated over its tags first (tags of one prompt, not the categorisations of every vote, are grouped),
    then joined to the categorisations, one row per vote (a vote has one categorisation). ``bit_or`` on
    PostgreSQL; elsewhere a sum of the distinct bits, which is the same mask."""
    assert 0 < len(protocol_sha256s) <= MASK_BITS and len(set(protocol_sha256s)) == len(protocol_sha256s)
    cat, tag = VoteCategorization._meta.db_table, PromptTag._meta.db_table
    bits = " ".join(f"WHEN %s THEN {1 << k}" for k in range(len(protocol_sha256s)))
    either = f"CAST(CASE t.protocol_sha256 {bits} END AS BIGINT)"
    mask = f"bit_or({either})" if vendor == "postgresql" else f"SUM(DISTINCT {either})"
    sql = (
        f"SELECT CAST(c.vote_id AS BIGINT), CAST(m.mask AS BIGINT) FROM {cat} c JOIN ("
        f"SELECT t.prompt_sha256, {mask} AS mask FROM {tag} t WHERE t.tagger_name = %s AND t.value"
        " AND t.protocol_sha256 IN (" + ", ".join(["%s"] * len(protocol_sha256s)) + ")"
        " GROUP BY t.prompt_sha256) m ON m.prompt_sha256 = c.prompt_sha256"
    )
    return sql, [*protocol_sha256s, tagger_name, *protocol_sha256s]


def tagged_vote_masks(protocol_sha256s: list[str], tagger_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Every protocol's tagged votes in one statement (:func:`tagged_masks_sql`): (vote ids, masks), int64,
    sorted by vote id, one entry per vote tagged in at least one category; bit k of a mask: the tagger put
    the vote's first prompt in ``protocol_sha256s[k]``'s category. On PostgreSQL the rows come packed as
    :mod:`arena.votes.columns` packs the refit's votes (a ``string_agg`` of ``int8send`` per column, one
    ``bytea`` each, decoded with ``np.frombuffer``), not as a Python tuple (or a COPY message) per vote."""
    sql, params = tagged_masks_sql(protocol_sha256s, tagger_name, vendor=connection.vendor)
    if connection.vendor == "postgresql":
        packed = (
            "SELECT count(*), string_agg(int8send(r.vote_id), ''::bytea), string_agg(int8send(r.mask), ''::bytea)"
            f" FROM ({sql}) r(vote_id, mask)"
        )
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:  # server-side binding: binary results
            cursor.execute(packed, params, binary=True)
            count, ids, masks = cursor.fetchone()
        ids = np.frombuffer(bytes(ids or b""), dtype=">i8").astype(np.int64)
        masks = np.frombuffer(bytes(masks or b""), dtype=">i8").astype(np.int64)
        if len(ids) != count or len(masks) != count:
            raise ValueError(f"tag masks: {len(ids)} ids and {len(masks)} masks for {count} votes")
    else:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            found = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
        ids, masks = found[:, 0], found[:, 1]
    order = np.argsort(ids, kind="stable")
    return ids[order], masks[order]


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
    tagging is off or ``votes`` carry no vote ids.

    Every protocol's tagged votes come from one statement (:func:`tagged_vote_masks`: a bitmask per tagged
    vote), looked up by vote id with a binary search; before issue 31 it was one semi-join per protocol
    (:func:`tagged_vote_ids`), each reading every categorisation (bench/refit_tagged.py)."""
    name = categories.tagger_name()
    if not name or votes.vote_id is None:
        return {}, {}
    protocols = categories.category_protocols()
    shas = list(dict.fromkeys(p.sha256 for p in protocols))
    vote_ids = np.asarray(votes.vote_id, dtype=np.int64)
    bit_of: dict[str, tuple[int, np.ndarray]] = {}
    for start in range(0, len(shas), MASK_BITS):
        chunk = shas[start : start + MASK_BITS]
        ids, masks = tagged_vote_masks(chunk, name)
        if not len(ids):  # nothing tagged yet
            ids, masks = np.zeros(1, np.int64), np.zeros(1, np.int64)  # a mask of 0 matches no vote anyway
        at = np.minimum(np.searchsorted(ids, vote_ids), len(ids) - 1)
        per_vote = np.where(ids[at] == vote_ids, masks[at], 0)
        bit_of.update({sha: (k, per_vote) for k, sha in enumerate(chunk)})
    out, made_by = {}, {}
    for protocol in protocols:
        k, per_vote = bit_of[protocol.sha256]
        out[protocol.category] = (per_vote >> k) & 1 == 1
        made_by[protocol.category] = {
            "protocol": protocol.name, "protocol_version": protocol.version,
            "protocol_sha256": protocol.sha256, "tagger": name,
            "threshold": protocol.threshold, "criteria": [c.name for c in protocol.criteria],
        }  # fmt: skip
    return out, made_by


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
    mid-p interval, confusion cells) over every checked tag of the configured protocol, each staff
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


def tagging_backlog() -> dict[str, int]:
    """Counted votes the tagger has not reached: ``waiting`` (a pending categorization, or none yet: the
    votes above the newest enlisted one, which the queue enlists next) and ``failed`` (tagging failed
    ``ARENA_CATEGORY_MAX_ATTEMPTS`` times; staff can retry them). Two small queries."""
    found = VoteCategorization.objects.aggregate(
        pending=Count("id", filter=Q(status=VoteCategorization.Status.PENDING, vote__counted=True)),
        failed=Count("id", filter=Q(status=VoteCategorization.Status.FAILED, vote__counted=True)),
        newest=Max("vote_id"),
    )
    unlisted = Vote.objects.filter(counted=True, id__gt=found["newest"] or 0, categorization__isnull=True).count()
    return {"waiting": found["pending"] + unlisted, "failed": found["failed"]}
