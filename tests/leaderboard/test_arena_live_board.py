"""The live board on the arena page and in the API: live point ratings with the refit's intervals
beside them, and how old each is."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from arena.models import LiveRating, RatingSnapshot
from arena.ratings import live
from arena.ratings.refit import snapshots_refit
from leaderboard.arena_board.page import age
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

STRENGTHS = {"top": 1.5, "mid": 0.0, "low": -1.5}


@pytest.fixture
def rated(db):
    votes_create(STRENGTHS, 300, seed=2)
    snapshots_refit(rounds=20, provisional_votes=0)
    # The refit is eight minutes old; votes after it move the live ratings only.
    RatingSnapshot.objects.update(created_at=timezone.now() - timedelta(minutes=8))
    votes_create({"top": -3.0, "mid": 0.0, "low": 3.0}, 400, seed=3, start=timezone.now())
    live.live_refit()
    LiveRating.objects.update(fitted_at=timezone.now() - timedelta(minutes=3))


def test_page_shows_live_ratings_with_the_refits_intervals_and_both_ages(client, rated):
    html = client.get("/leaderboard/arena/").content.decode()
    section = html[html.index('id="arena-live"'):html.index("</section>")]
    assert re.search(r"Ratings updated 3 minutes ago from 700 votes", section), section[:600]
    assert re.search(r"intervals from the refit of \d\d:\d\d UTC, 8 minutes ago \(300 votes\)", section)
    live_order = re.findall(r'<tr data-model="([^"]+)"', section)
    row = LiveRating.objects.get(category="overall")
    assert live_order == [r["model"] for r in row.rows] == ["low", "mid", "top"]  # the votes since the refit
    bt = {r["model"]: r for r in RatingSnapshot.objects.get(method="bt", category="overall").rows}
    low = section[section.index('data-model="low"'):]
    low = low[: low.index("</tr>")]
    assert f"{bt['low']['ci_low']:.0f} – {bt['low']['ci_high']:.0f}" in low  # the refit's interval beside it
    assert f"{row.rows[0]['rating']:.0f}" in low


def test_no_live_block_before_any_live_fit_and_none_for_style(client, db):
    votes_create(STRENGTHS, 60, seed=4)
    snapshots_refit(rounds=20)
    assert 'id="arena-live"' not in client.get("/leaderboard/arena/").content.decode()
    live.live_refit()
    assert 'id="arena-live"' in client.get("/leaderboard/arena/").content.decode()
    assert 'id="arena-live"' not in client.get("/leaderboard/arena/?method=style").content.decode()


def test_live_fit_before_any_refit_says_so(client, db):
    votes_create(STRENGTHS, 60, seed=5)
    live.live_refit()
    html = client.get("/leaderboard/arena/").content.decode()
    assert "from 60 votes" in html and "no refit with intervals yet" in html


def test_api_exposes_the_live_ratings_with_their_timestamp(client, rated):
    data = client.get("/api/ratings/").json()
    assert data["live"]["vote_count"] == 700 and data["vote_count"] == 300
    assert data["live"]["fitted_at"] and [r["model"] for r in data["live"]["rows"]] == ["low", "mid", "top"]
    assert client.get("/api/ratings/?method=elo").json()["live"] is None
    live_only = client.get("/api/ratings/live/").json()
    assert live_only["category"] == "overall" and live_only["rows"] == data["live"]["rows"]
    assert client.get("/api/ratings/live/?category=language:xx").status_code == 404
    assert client.get("/api/ratings/live/?category=" + "x" * 100).status_code == 400
    assert client.get("/api/ratings/live/?bogus=1").status_code == 400


def test_ages_in_words():
    assert [age(0.42), age(12.4), age(480), age(7200), age(3 * 86400)] == [
        "0.4 s", "12 s", "8 minutes", "2 hours", "3 days"
    ]
