"""The live board's tagged votes come from one statement for every protocol (arena.categories.selectors.
tagged_vote_groups, issue 31: it read every tag of each protocol before): per protocol, exactly the counted
votes after the refit whose prompt the configured tagger put in the category, each once, even when two
tagger keys of one configured tagger (weights changed at the same path) both tagged the prompt."""

from __future__ import annotations

from collections import Counter

import pytest

from arena.categories import tagger as categories
from arena.categories.selectors import tagged_vote_groups
from arena.models import Vote, VoteCategorization
from arena.ratings import live
from tests.arena.tag_rows import tag_row
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def protocols(settings):
    settings.ARENA_CATEGORY_TAGGER = {"backend": "hf", "model_args": {"path": "/nowhere/tagger"}}
    settings.ARENA_CATEGORY_PROTOCOLS = ["coding", "math"]
    return categories.category_protocols()




def test_every_protocol_in_one_statement_each_vote_once(protocols):
    coding, math = protocols
    votes = votes_create({"alpha": 1.0, "beta": 0.0, "gamma": -1.0}, 60, seed=3)
    uncounted = votes_create({"alpha": 1.0, "beta": 0.0}, 6, seed=4, counted=False)
    after = votes[9].pk  # the refit's high water: the first ten votes are in its base
    expected = {coding.category: Counter(), math.category: Counter()}
    for k, vote in enumerate([*votes, *uncounted]):
        digest = f"{k % 25:064x}"  # prompts repeat: a tag serves every vote of its prompt
        VoteCategorization.objects.create(vote=vote, prompt_sha256=digest, status="done")
        if k < 25:  # each prompt's tags, written once
            tag_row(digest, coding, value=k % 2 == 0)
            tag_row(digest, math, value=k % 3 == 0)
            if k % 4 == 0:  # a second key of the same configured tagger: the vote still counts once
                tag_row(digest, coding, value=True, tagger="hf:key-2")
            if k % 5 == 1:  # another tagger's verdict is not this board's
                tag_row(digest, math, value=True, tagger="hf:other", name="hf:/elsewhere#0")
        if vote.pk <= after or not vote.counted:
            continue
        prompt = k % 25
        outcome = live.OUTCOMES[vote.winner]
        key = (vote.model_a_id, vote.model_b_id, outcome)
        if prompt % 2 == 0 or prompt % 4 == 0:
            expected[coding.category][key] += 1
        if prompt % 3 == 0:
            expected[math.category][key] += 1
    found = tagged_vote_groups(after, live.OUTCOMES, live.UNKNOWN_OUTCOME)
    assert set(found) == {coding.category, math.category}
    for category, rows in found.items():
        assert rows.shape[1] == 4 and rows.dtype.kind == "i"
        assert {(a, b, o): n for a, b, o, n in rows.tolist()} == dict(expected[category]), category
    assert sum(expected[coding.category].values()) > 0 and sum(expected[math.category].values()) > 0
    assert Vote.objects.filter(counted=False).exists()


def test_nothing_tagged_yet_gives_empty_groups_and_tagging_off_gives_none(protocols, settings):
    votes = votes_create({"alpha": 1.0, "beta": 0.0}, 5, seed=5)
    found = tagged_vote_groups(0, live.OUTCOMES, live.UNKNOWN_OUTCOME)
    assert {c: rows.shape for c, rows in found.items()} == {"coding": (0, 4), "math": (0, 4)}
    assert votes
    settings.ARENA_CATEGORY_TAGGER = None
    assert tagged_vote_groups(0, live.OUTCOMES, live.UNKNOWN_OUTCOME) == {}
