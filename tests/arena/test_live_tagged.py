"""A category tagged by the model on the live board: its counts are the refit's base plus every vote after
it whose prompt is tagged by the time of the live fit (a tag arrives after its vote), equal to a full
aggregation of the tagged votes; the live fit is evalcore's point fit on them; the board shows the live
table for the category as for a built-in one. Tags are written directly (no tagger model is loaded)."""

from __future__ import annotations

import pytest

from arena.categories import tagger as categories
from arena.models import LiveRating, PairCountBase, PromptTag, Vote, VoteCategorization
from arena.ratings import live
from arena.ratings.refit import snapshots_refit
from evalcore.ratings import aggregate, battles_from_arrays, fit_bradley_terry
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

STRENGTHS = {"alpha": 1.0, "beta": 0.3, "gamma": -0.4, "delta": -1.0}
CATEGORY = "coding"


@pytest.fixture
def tagging(settings):
    settings.ARENA_CATEGORY_TAGGER = {
        "backend": "hf",
        "model_args": {"path": "/nowhere/tagger", "dtype": "float32"},
    }
    settings.ARENA_CATEGORY_PROTOCOLS = ["coding"]
    live._SETTLED.clear()
    (protocol,) = categories.category_protocols()
    return protocol


def tag(votes: list[Vote], protocol, *, every: int = 2) -> list[Vote]:
    """Queue rows for ``votes``; every ``every``-th one's prompt is tagged in the category. The tagged votes."""
    name = categories.tagger_name()
    inside = []
    for k, vote in enumerate(votes):
        digest = f"{vote.pk:064x}"
        VoteCategorization.objects.create(vote=vote, prompt_sha256=digest, status="done")
        PromptTag.objects.create(
            prompt_sha256=digest, category=protocol.category, protocol=protocol.name,
            protocol_version=protocol.version, protocol_sha256=protocol.sha256, tagger="hf:test", tagger_name=name,
            value=k % every == 0, score=1 if k % every == 0 else 0,
        )  # fmt: skip
        if k % every == 0:
            inside.append(vote)
    return inside


def expected_counts(votes: list[Vote]):
    by_id = {
        v.pk: v
        for v in Vote.objects.filter(pk__in=[v.pk for v in votes]).select_related("model_a", "model_b")
    }
    rows = [by_id[v.pk] for v in votes]
    return aggregate(battles_from_arrays([v.model_a.name for v in rows], [v.model_b.name for v in rows],
                                         [v.winner for v in rows]))  # fmt: skip


def assert_same(a, b):
    assert a.models == b.models
    key = lambda c: sorted(zip(c.i.tolist(), c.j.tolist(), *(x.tolist() for x in c.cells().T)))  # noqa: E731
    assert key(a) == key(b)


def test_a_tagged_category_is_live_between_refits(tagging, client):
    first = votes_create(STRENGTHS, 160, seed=1)
    inside = tag(first, tagging)
    snapshots_refit(rounds=10, min_category_votes=10)
    assert PairCountBase.objects.get(category=CATEGORY).vote_count == len(inside) == 80

    later = votes_create(STRENGTHS, 60, seed=2, start=first[-1].battle_started_at)
    counts = live.live_counts()  # untagged so far: the category is the refit's
    assert counts.votes[CATEGORY] == 80
    assert_same(counts.counts[CATEGORY], expected_counts(inside))

    inside += tag(later[:40], tagging)  # the tagger caught up with 40 of them, 20 in the category
    counts = live.live_counts()
    assert counts.votes[CATEGORY] == 100
    assert_same(counts.counts[CATEGORY], expected_counts(inside))

    live.live_refit(min_category_votes=10)
    row = LiveRating.objects.get(category=CATEGORY)
    assert row.vote_count == 100
    want = fit_bradley_terry(expected_counts(inside), ties=live.TIES)
    want = dict(zip(want.models, want.ratings.tolist()))
    assert {r["model"]: r["rating"] for r in row.rows} == pytest.approx(want, abs=1e-4)

    html = client.get(f"/leaderboard/arena/?category={CATEGORY}").content.decode()
    assert 'id="arena-live"' in html and "from 100 votes" in html
    assert client.get(f"/api/ratings/live/?category={CATEGORY}").json()["vote_count"] == 100


def test_tagging_off_leaves_the_live_board_as_it_was(tagging, settings):
    votes_create(STRENGTHS, 40, seed=3)
    settings.ARENA_CATEGORY_TAGGER = None
    live.live_refit(min_category_votes=10)
    assert not LiveRating.objects.filter(category=CATEGORY).exists()
    assert LiveRating.objects.filter(category="overall").exists()
