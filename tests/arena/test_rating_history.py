"""A model's rating history outlives snapshot pruning (arena.ratings.history): points written with each
refit's snapshots (one transaction), the model page charting every point after the snapshots are pruned,
the back-fill from stored snapshots (migration 0016), the thinning rule (every point for 7 days, then the
last of each UTC day), models not public never listed, and hostile query parameters refused with a 400."""

from __future__ import annotations

import importlib
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps

from arena.models import LanguageModel, RatingPoint, RatingSnapshot
from arena.ratings import live
from arena.ratings import refit as ratings
from arena.ratings import selectors as rating_selectors
from arena.ratings.history import FULL_RESOLUTION, history_backfill, history_thin
from arena.ratings.refit import snapshots_refit
from arena.ratings.selectors import rating_history
from tests.arena.vote_data import T0, votes_create
from tests.conftest import clean_env, run_manage

pytestmark = pytest.mark.django_db

STRENGTHS = {"alpha": 1.0, "beta": 0.0, "gamma": -1.0}
SECRET = "secret-proto-9"
ROUNDS = 20


def chart(client, name, query=""):
    response = client.get(f"/leaderboard/arena/models/{name}/{query}")
    assert response.status_code == 200, response.content[:500]
    html = response.content.decode()
    figure = json.loads(
        re.search(r'<script id="arena-history" type="application/json">(.*?)</script>', html, re.S).group(1)
    )
    table = html[html.index('<table class="arena-history">') :]
    return figure["history"]["data"][0], len(re.findall(r"<tr><td>", table)), html


def refits(n: int) -> list[dict[str, float]]:
    """``n`` refits through the real path, more votes before each; alpha's bt row of each snapshot."""
    seen = []
    for k in range(n):
        votes_create(STRENGTHS, 200, seed=10 + k, start=T0 + timedelta(days=k))
        assert snapshots_refit(rounds=ROUNDS, seed=1)["skipped"] is False
        seen.append(next(r for r in rating_selectors.snapshot_latest("bt").rows if r["model"] == "alpha"))
    return seen


def test_the_page_charts_every_refit_after_the_snapshots_are_pruned(client, monkeypatch):
    monkeypatch.setattr(ratings, "KEEP_PER_KEY", 2)
    seen = refits(5)
    assert RatingSnapshot.objects.filter(method="bt", category="overall").count() == 2  # pruned
    trace, rows, html = chart(client, "alpha")
    assert len(trace["x"]) == 5 and rows == 5  # every refit, on the chart and in the table
    assert trace["y"] == pytest.approx([r["rating"] for r in seen], abs=1e-4)
    assert trace["error_y"]["array"] == pytest.approx([r["ci_high"] - r["rating"] for r in seen], abs=1e-4)
    assert all(text.endswith("scale: centred (mean 1000)") for text in trace["text"])
    history = rating_history("alpha")
    assert [p["votes"] for p in history] == [200, 400, 600, 800, 1000]
    assert [p["rank"] for p in history] == [r["rank_ub"] for r in seen]
    assert [p["battles"] for p in history] == [r["battles"] for r in seen]
    assert history[0]["at"] < history[-1]["at"]
    assert not RatingSnapshot.objects.filter(pk=history[0]["snapshot"]).exists()  # its snapshot is gone
    # Every method and category of each refit has its points; the style method is on the page too.
    assert RatingPoint.objects.filter(model="alpha", method="elo", category="overall").count() == 5
    assert len(chart(client, "alpha", "?method=style")[0]["x"]) == 5


def test_points_are_written_in_the_refit_transaction(monkeypatch):
    votes_create(STRENGTHS, 300, seed=2)

    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(live, "base_store", broken)  # fails after the snapshots were saved
    with pytest.raises(RuntimeError):
        snapshots_refit(rounds=ROUNDS)
    assert not RatingSnapshot.objects.exists() and not RatingPoint.objects.exists()


def test_the_anchor_in_force_is_kept_with_each_point(client, settings):
    refits(1)
    settings.ARENA_ANCHOR_MODEL, settings.ARENA_ANCHOR_RATING = "beta", 1100.0
    refits(1)
    first, second = rating_history("alpha")
    assert first["anchor"] == {"model": None, "rating": None, "applied": False}
    assert second["anchor"] == {"model": "beta", "rating": 1100.0, "applied": True}
    trace, _rows, html = chart(client, "alpha")
    assert trace["text"][1].endswith("scale: beta at 1100") and "The scale changed" in html


def snapshot_create(at: datetime, rows: list, *, method="bt", category="overall", anchor=None) -> RatingSnapshot:
    settings = {} if anchor is None else {"anchor": anchor}
    snap = RatingSnapshot.objects.create(
        method=method, category=category, vote_count=100, settings=settings, rows=rows, extra={}
    )
    RatingSnapshot.objects.filter(pk=snap.pk).update(created_at=at)
    return snap


def row(model, rating, **more):
    return {"model": model, "rating": rating, "ci_low": rating - 20, "ci_high": rating + 20, "rank": 1,
            "rank_ub": 1, "battles": 50, **more}  # fmt: skip


def test_the_migration_back_fills_the_stored_snapshots_and_may_run_again():
    now = datetime.now(UTC)
    anchor = {"model": "beta", "rating": 1100.0, "applied": True, "shift": 3.0}
    older = snapshot_create(now - timedelta(hours=30), [row("alpha", 1050.0), row("beta", 1100.0, ci_low=None)])
    newer = snapshot_create(
        now - timedelta(hours=1),
        [row("alpha", 1060.0), {"model": "gamma", "rating": None}, "not a row", {"rating": 3.0}],
        anchor=anchor,
    )
    snapshot_create(now - timedelta(hours=2), [row("alpha", 990.0)], method="style", category="coding")
    migration = importlib.import_module("arena.migrations.0016_rating_history")
    migration.backfill(apps, None)  # the migration's step, with today's models for the historical ones
    history = rating_history("alpha")
    assert [(p["snapshot"], p["rating"], p["votes"]) for p in history] == [(older.pk, 1050.0, 100), (newer.pk, 1060.0, 100)]
    assert history[0]["anchor"]["model"] is None and history[1]["anchor"] == {
        "model": "beta", "rating": 1100.0, "applied": True,
    }  # fmt: skip
    assert rating_history("beta")[0]["ci_low"] is None  # an open bound stays open
    assert rating_history("gamma") == []  # no finite rating: no point, as the page always did
    assert [p["rating"] for p in rating_history("alpha", method="style", category="coding")] == [990.0]
    assert RatingPoint.objects.count() == 4
    assert history_backfill(now=now) == 4 and RatingPoint.objects.count() == 4  # nothing added twice


def point(model: str, at: datetime, rating: float = 1000.0) -> RatingPoint:
    return RatingPoint.objects.create(
        model=model, method="bt", category="overall", at=at, snapshot_id=1, vote_count=10, rating=rating
    )


NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)


def test_points_older_than_a_week_are_thinned_to_the_last_of_each_utc_day():
    kept, thinned = [], []
    for days in range(6, 11):  # 6 days ago (all kept) to 10 days ago (one a day)
        day = (NOW - timedelta(days=days)).replace(hour=0, minute=0)
        times = [day + timedelta(hours=h) for h in (1, 9, 17, 23.5)]
        pts = [point("alpha", at, rating=1000 + k) for k, at in enumerate(times)]
        for p in pts:
            (kept if p.at >= NOW - FULL_RESOLUTION or p is pts[-1] else thinned).append(p.pk)
    other = point("beta", NOW - timedelta(days=9, hours=1))  # alone on its day for its model: kept
    assert history_thin(now=NOW) == len(thinned)
    assert set(RatingPoint.objects.filter(model="alpha").values_list("id", flat=True)) == set(kept)
    assert RatingPoint.objects.filter(pk=other.pk).exists()
    # What is left of a thinned day is its last point (23:30 UTC): the next day starts a new one.
    left = [p["at"] for p in rating_history("alpha") if p["at"] < NOW - timedelta(days=8)]
    assert [(at.hour, at.minute) for at in left] == [(23, 30), (23, 30)]
    assert history_thin(now=NOW) == 0  # the rule holds: nothing more to take


def test_a_refit_thins_only_what_aged_since_the_previous_one_and_the_first_thins_all():
    # Aged long ago, all three on one UTC day (noon minus 1-3 hours: the test once failed between 01:00
    # and 03:00 UTC, when "30 days and 1-3 hours ago" straddled midnight and two days kept a point each).
    noon = (datetime.now(UTC) - timedelta(days=30)).replace(hour=12, minute=0, second=0, microsecond=0)
    for h in (1, 2, 3):
        point("alpha", noon - timedelta(hours=h))
    refits(1)  # the first refit (no earlier snapshot) thins everything
    assert RatingPoint.objects.filter(at__lt=datetime.now(UTC) - FULL_RESOLUTION).count() == 1
    since = NOW - timedelta(days=2)
    for h in (1, 2):
        point("delta", NOW - timedelta(days=20, hours=h))  # aged before the previous thinning: not looked at
        point("epsilon", NOW - timedelta(days=8, hours=h))  # aged since: thinned
    assert history_thin(now=NOW, since=since) == 1
    assert RatingPoint.objects.filter(model="delta").count() == 2


def test_a_model_not_shown_publicly_is_never_listed(client):
    votes_create({**STRENGTHS, SECRET: 0.5, "quiet-proto": 0.2}, 600, seed=4)
    LanguageModel.objects.filter(name=SECRET).update(public=False, name_withheld=True)
    LanguageModel.objects.filter(name="quiet-proto").update(public=False)
    snapshots_refit(rounds=ROUNDS)
    assert RatingPoint.objects.filter(model=SECRET).exists()  # kept: it may be released later
    assert rating_history(SECRET) == [] and rating_history("quiet-proto") == []
    for name in (SECRET, "quiet-proto"):
        response = client.get(f"/leaderboard/arena/models/{name}/")
        assert response.status_code == 404 and "arena-history" not in response.content.decode()
    _trace, rows, html = chart(client, "alpha")
    assert rows == 1 and SECRET not in html and "quiet-proto" not in html


HOSTILE = [
    "?method=elo",
    "?method=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "?category=" + "x" * 5000,
    "?category=..%2F..%2Fetc%2Fpasswd",
    "?category=overall%00",
    "?category=overall&category=coding",
    "?since=2026-01-01",
    "?method=bt&x=1",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_query_parameters_on_the_model_page_get_a_clear_400(client, query):
    refits(1)
    response = client.get(f"/leaderboard/arena/models/alpha/{query}")
    html = response.content.decode()
    assert response.status_code == 400, query
    assert "This page cannot show that selection" in html and "<script>alert" not in html


SQLITE_SCRIPT = """
import json
from datetime import UTC, datetime, timedelta
from arena.models import RatingPoint, RatingSnapshot
from arena.ratings.history import history_backfill, history_thin
from arena.ratings.selectors import rating_history
NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
for days in (8, 9):
    for hours in (1, 9, 23.5):
        at = (NOW - timedelta(days=days)).replace(hour=0, minute=0) + timedelta(hours=hours)
        RatingPoint.objects.create(model="a", method="bt", category="overall", at=at, snapshot_id=1, vote_count=1,
                                   rating=1.0)
out = {"thinned": history_thin(now=NOW), "left": sorted(p.at.isoformat() for p in RatingPoint.objects.all())}
RatingSnapshot.objects.create(method="bt", category="overall", vote_count=5, rows=[{"model": "b", "rating": 990.0}],
                              settings={"anchor": {"model": "b", "rating": 990.0, "applied": True}})
out["offered"] = history_backfill()
out["b"] = [[p["rating"], p["anchor"]] for p in rating_history("b")]
print(json.dumps(out))
"""


def test_history_on_sqlite(sqlite_var_dir):
    """The embedded default: thinning's day arithmetic and the back-fill's JSON reads work on SQLite too."""
    env = clean_env(PODIUM_VAR_DIR=str(sqlite_var_dir))
    result = run_manage("shell", "-c", SQLITE_SCRIPT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["thinned"] == 4 and out["left"] == ["2026-03-11T23:30:00+00:00", "2026-03-12T23:30:00+00:00"]
    assert out["offered"] == 1 and out["b"] == [[990.0, {"model": "b", "rating": 990.0, "applied": True}]]
