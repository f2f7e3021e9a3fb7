"""A category without ratings yet on the arena board: a configured tagged category answers 200 and says how
many votes it holds and needs (and how far the tagger has got), the selector lists the configured
categories with their vote counts now (overall counts every counted vote, not the last refit's), the page
never says both "live ratings" and "no ratings yet", "too few votes" is said once, the downloads are
always linked, and an unknown category is a 404 that lists the categories there are. Tags are written
directly (no tagger model is loaded)."""

from __future__ import annotations

import re

import pytest

from arena.categories import tagger as categories
from arena.models import LiveRating, PromptTag, RatingSnapshot, Vote, VoteCategorization
from arena.ratings import live
from arena.ratings.refit import snapshots_refit
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

STRENGTHS = {"alpha": 1.0, "beta": 0.3, "gamma": -0.4, "delta": -1.0}
ROUNDS = 10


@pytest.fixture
def tagging(settings):
    settings.ARENA_CATEGORY_TAGGER = {"backend": "hf", "model_args": {"path": "/nowhere/tagger", "dtype": "float32"}}
    settings.ARENA_CATEGORY_PROTOCOLS = ["hard-prompt", "coding", "math"]
    live._SETTLED.clear()
    return {p.category: p for p in categories.category_protocols()}


def tag(votes: list[Vote], protocol, *, inside: int) -> None:
    """The tagger's verdicts on ``votes``: the first ``inside`` of them in ``protocol``'s category."""
    for k, vote in enumerate(votes):
        digest = f"{vote.pk:064x}"
        VoteCategorization.objects.get_or_create(vote=vote, defaults={"prompt_sha256": digest, "status": "done"})
        PromptTag.objects.create(
            prompt_sha256=digest, category=protocol.category, protocol=protocol.name,
            protocol_version=protocol.version, protocol_sha256=protocol.sha256, tagger="hf:test",
            tagger_name=categories.tagger_name(), value=k < inside, score=int(k < inside),
        )  # fmt: skip


def selector(html: str) -> dict[str, str]:
    select = re.search(r'<select name="category">(.*?)</select>', html, re.S).group(1)
    return dict(re.findall(r'<option value="([^"]+)"[^>]*>([^<]+)</option>', select))


def test_a_configured_category_below_the_minimum_answers_200_and_says_why(tagging, client):
    votes = votes_create(STRENGTHS, 12, seed=1)
    tag(votes[:10], tagging["coding"], inside=2)  # two votes in coding; two counted votes not tagged yet
    snapshots_refit(rounds=ROUNDS)  # overall rated (12 >= 10); coding below the minimum of 50
    live.live_refit()
    assert not RatingSnapshot.objects.filter(category="coding").exists()
    assert LiveRating.objects.get(category="coding").vote_count == 2

    response = client.get("/leaderboard/arena/?category=coding")
    assert response.status_code == 200
    html = response.content.decode()
    assert "No ratings yet for coding: too few votes. 2 counted votes so far" in html
    assert "ratings appear from 50 (48 more)" in html
    assert html.count("too few votes") == 1
    assert 'id="arena-live"' not in html  # no "Live ratings ... from 2 votes" beside "No ratings yet"
    assert "The tagger has yet to read 2 counted votes" in html
    assert 'id="category-check"' in html  # who tags it, and the (unchecked) agreement with staff
    options = selector(html)
    assert options["overall"] == "Overall (12 votes)"
    assert options["coding"] == "Coding (2 votes; ratings from 50)"
    assert options["math"] == "Math (0 votes; ratings from 50)"
    assert options["hard_prompt"] == "Hard prompts (0 votes; ratings from 50)"
    assert '<option value="coding" selected>' in html

    for category in ("math", "hard_prompt"):
        response = client.get(f"/leaderboard/arena/?category={category}")
        assert response.status_code == 200
        html = response.content.decode()
        assert "too few votes. No vote counted in it yet; ratings appear from 50 (50 more)" in html
        assert html.count("too few votes") == 1
    response = client.get("/leaderboard/arena/?category=math&method=style")
    assert response.status_code == 200 and "No vote counted in it yet" in response.content.decode()


def test_overall_counts_every_counted_vote_not_the_last_refits(tagging, client):
    snapshots_refit(rounds=ROUNDS)  # a refit before any vote: overall's snapshot covers 0 votes
    assert RatingSnapshot.objects.get(method="bt", category="overall").vote_count == 0
    votes_create(STRENGTHS, 4, seed=2)
    votes_create(STRENGTHS, 3, seed=3, counted=False)  # kept but not counted: in no count
    live.live_refit()
    html = client.get("/leaderboard/arena/").content.decode()
    assert selector(html)["overall"] == "Overall (4 votes; ratings from 10)"
    assert "Overall (0 votes" not in html
    assert "too few votes. 4 counted votes so far; ratings appear from 10 (6 more)" in html
    assert html.count("too few votes") == 1  # not again in the live board, nor in the snapshot's notes
    assert 'id="arena-live"' not in html
    # The downloads are there below the minimum too (the votes exist; ratings of the snapshot too).
    downloads = re.search(r'<p class="downloads" id="arena-downloads">(.*?)</p>', html, re.S).group(1)
    for href in ("/api/votes.csv", "/api/votes.jsonl", "/api/ratings/?method=bt&amp;category=overall&amp;format=csv",
                 "/api/ratings/?method=bt&amp;category=overall", "/arena/releases/", "/api/docs/"):  # fmt: skip
        assert f'href="{href}"' in downloads, href


def test_enough_votes_before_the_refit_shows_live_ratings_without_saying_none(tagging, client):
    first = votes_create(STRENGTHS, 100, seed=4)
    snapshots_refit(rounds=ROUNDS)  # nothing tagged: no coding snapshot
    later = votes_create(STRENGTHS, 70, seed=7, start=first[-1].battle_started_at)
    tag(later, tagging["coding"], inside=60)  # votes after the refit, tagged: 60 of them in coding
    live.live_refit()
    assert LiveRating.objects.get(category="coding").rows  # live point ratings from 60 >= 50 votes
    html = client.get("/leaderboard/arena/?category=coding").content.decode()
    assert 'id="arena-live"' in html and "from 60 votes" in html
    assert "No ratings yet" not in html and "too few votes" not in html
    assert "Coding holds 60 counted votes, enough for ratings" in html
    assert "after the next refit" in html
    assert selector(html)["coding"] == "Coding (60 votes)"
    snapshots_refit(rounds=ROUNDS)
    html = client.get("/leaderboard/arena/?category=coding").content.decode()
    assert 'id="arena-empty"' not in html and "coding: 60 votes" in html  # rated now: the table, no status


def test_tagging_off_says_the_category_stays_empty(tagging, settings, client):
    settings.ARENA_CATEGORY_TAGGER = None
    votes_create(STRENGTHS, 12, seed=5)
    snapshots_refit(rounds=ROUNDS)
    response = client.get("/leaderboard/arena/?category=coding")
    assert response.status_code == 200
    html = response.content.decode()
    assert "no tagger is" in html and "ARENA_CATEGORY_TAGGER" in html
    assert "coding" not in selector(html)  # not offered while nothing can fill it


@pytest.mark.parametrize("category", ["nosuch", "language:xx", "coding_x"])
def test_an_unknown_category_is_a_404_that_lists_the_categories(tagging, client, category):
    votes_create(STRENGTHS, 12, seed=6)
    snapshots_refit(rounds=ROUNDS)
    response = client.get(f"/leaderboard/arena/?category={category}&method=style")
    assert response.status_code == 404
    html = response.content.decode()
    assert f"There is no category “{category}” on this board" in html
    assert 'href="/leaderboard/arena/?category=overall&amp;method=style">Overall (12 votes)</a>' in html
    assert 'href="/leaderboard/arena/?category=coding&amp;method=style">Coding (0 votes; ratings from 50)</a>' in html


@pytest.mark.parametrize(
    "query",
    ["category=coding%00", "category=coding&category=math", "category=%E2%80%AEcoding", "category=" + "c" * 65,
     "category=coding&method=elo"],
)  # fmt: skip
def test_hostile_category_parameters_get_a_400(tagging, client, query):
    response = client.get(f"/leaderboard/arena/?{query}")
    assert response.status_code == 400
    assert "cannot show that selection" in response.content.decode()
