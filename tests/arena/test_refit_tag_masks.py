"""The refit's tag masks come from one statement for every protocol (arena.categories.selectors.tag_masks,
issue 31: one semi-join per protocol before): per protocol, exactly the mask the per-protocol read gave
(tagged_vote_ids + np.isin), with several protocols, prompts tagged by two keys of the configured tagger
and by another tagger, tags not in the category (value False), votes without a categorisation, pending
categorisations and vote ids out of order or repeated."""

from __future__ import annotations

import dataclasses
import sqlite3

import numpy as np
import pytest
from django.db import connection

from arena.categories import tagger as categories
from arena.categories.selectors import tag_masks, tagged_masks_sql, tagged_vote_ids, tagged_vote_masks
from arena.models import PromptTag, VoteCategorization
from arena.votes.selectors import VoteColumns, votes_counted_columns
from tests.arena.tag_rows import tag_row
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

PROTOCOLS = ["hard-prompt", "coding", "math", "creative-writing", "instruction-following"]


@pytest.fixture
def protocols(settings):
    settings.ARENA_CATEGORY_TAGGER = {"backend": "hf", "model_args": {"path": "/nowhere/tagger"}}
    settings.ARENA_CATEGORY_PROTOCOLS = PROTOCOLS
    return categories.category_protocols()




def masks_before(votes: VoteColumns, protocols) -> dict[str, np.ndarray]:
    """The masks as tag_masks made them before issue 31: one read per protocol."""
    name = categories.tagger_name()
    return {p.category: np.isin(votes.vote_id, tagged_vote_ids(p.sha256, name)) for p in protocols}


def tags_made(protocols):
    """90 votes over 30 prompts, varied tags; returns the votes."""
    votes = votes_create({"alpha": 1.0, "beta": 0.0, "gamma": -1.0}, 90, seed=7)
    for k, vote in enumerate(votes):
        digest = f"{k % 30:064x}"
        if k % 11 == 5:
            continue  # no categorisation: in no category
        status = "pending" if k % 13 == 0 else "done"
        VoteCategorization.objects.create(vote=vote, prompt_sha256=digest, status=status)
    for prompt in range(30):
        digest = f"{prompt:064x}"
        if prompt % 7 == 6:
            continue  # not tagged yet
        for j, protocol in enumerate(protocols):
            tag_row(digest, protocol, value=(prompt + j) % (j + 2) == 0)  # value False: not in the category
            if prompt % 4 == j % 4:  # a second key of the configured tagger says yes too
                tag_row(digest, protocol, value=True, tagger="hf:key-2")
            if prompt % 5 == j:  # another tagger's verdict is not this board's
                tag_row(digest, protocol, value=True, tagger="hf:other", name="hf:/elsewhere#0")
    return votes


def test_one_statement_gives_the_per_protocol_masks(protocols):
    tags_made(protocols)
    votes = votes_counted_columns()
    before = masks_before(votes, protocols)
    masks, made_by = tag_masks(votes)
    assert list(masks) == [p.category for p in protocols] == list(made_by)
    for category, mask in masks.items():
        assert mask.dtype == bool and mask.shape == votes.vote_id.shape
        assert mask.tolist() == before[category].tolist(), category
    assert all(m.any() and not m.all() for m in masks.values())  # the data exercise both sides
    assert made_by["math"]["protocol_sha256"] == protocols[2].sha256

    # Vote ids out of order, repeated, and unknown to the database.
    shuffled = np.concatenate([votes.vote_id[::-1], votes.vote_id[:5], [10**12, 0]]).astype(np.int64)
    columns = dataclasses.replace(votes, vote_id=shuffled)
    masks = tag_masks(columns)[0]
    before = masks_before(columns, protocols)
    assert all(masks[c].tolist() == before[c].tolist() for c in masks)


def test_the_portable_statement_gives_the_same_masks_here_and_on_sqlite(protocols):
    tags_made(protocols)
    shas, name = [p.sha256 for p in protocols], categories.tagger_name()
    ids, masks = tagged_vote_masks(shas, name)
    assert (np.diff(ids) > 0).all()  # sorted, one entry per vote
    for k, sha in enumerate(shas):
        assert ids[(masks >> k) & 1 == 1].tolist() == tagged_vote_ids(sha, name).tolist()

    sql, params = tagged_masks_sql(shas, name, vendor="sqlite")  # SUM(DISTINCT ...), here on PostgreSQL
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        assert sorted(cursor.fetchall()) == list(zip(ids.tolist(), masks.tolist(), strict=True))

    db = sqlite3.connect(":memory:")  # and on SQLite, the same rows
    db.execute("CREATE TABLE arena_votecategorization (vote_id integer, prompt_sha256 text)")
    db.execute(
        "CREATE TABLE arena_prompttag (prompt_sha256 text, tagger_name text, protocol_sha256 text, value bool)"
    )
    db.executemany("INSERT INTO arena_votecategorization VALUES (?, ?)",
                   VoteCategorization.objects.values_list("vote_id", "prompt_sha256"))  # fmt: skip
    db.executemany(
        "INSERT INTO arena_prompttag VALUES (?, ?, ?, ?)",
        PromptTag.objects.values_list("prompt_sha256", "tagger_name", "protocol_sha256", "value"),
    )
    found = sorted(db.execute(sql.replace("%s", "?"), params).fetchall())
    assert found == list(zip(ids.tolist(), masks.tolist(), strict=True))


def test_nothing_tagged_and_tagging_off(protocols, settings):
    votes_create({"alpha": 1.0, "beta": 0.0}, 5, seed=5)
    votes = votes_counted_columns()
    masks, _ = tag_masks(votes)
    assert {c: m.tolist() for c, m in masks.items()} == {p.category: [False] * 5 for p in protocols}
    settings.ARENA_CATEGORY_TAGGER = None
    assert tag_masks(votes) == ({}, {})
