"""Ranks under filters: the board and /api/ratings/ rank the rows they show among themselves, as LMArena's
table does after hiding models (FastChat's recompute_final_ranking: 1 + the shown models whose interval
lies wholly above), so a model hidden from view (not public, retired and hidden, filtered out by
organisation, licence or open weights) neither pushes the others down nor leaves a gap."""

from __future__ import annotations

import random
import re

import pytest

from arena.catalogue.selectors import ranks_among
from arena.models import LanguageModel, RatingPoint, RatingSnapshot
from arena.ratings.refit import snapshots_refit
from arena.ratings.selectors import rating_history
from tests.arena.vote_data import votes_create


def row(model, rating, low, high, *, provisional=False, tied_with=(), rank_ci=None):
    return {
        "model": model, "rating": rating, "ci_low": low, "ci_high": high, "provisional": provisional,
        "rank": 0, "rank_ub": 0, "tied_with": list(tied_with), "tied_with_above": False, "rank_ci": rank_ci,
    }  # fmt: skip


def test_ranks_among_the_rows_shown():
    rows = [
        row("b", 1050, 1000, 1090, rank_ci=[2, 2]),
        row("c", 1040, 995, 1080, tied_with=["b"], rank_ci=[2, 3]),
        row("d", 950, 900, 990, rank_ci=[4, 4]),
        row("p", 1300, 1100, None, provisional=True, rank_ci=[1, 5]),  # open upper side: nothing wholly above
    ]
    ranks_among(rows, dropped=1)  # "a", best of all, not shown
    got = {r["model"]: (r["rank_ub"], r["rank"], r["tied_with_above"], r["rank_ci"]) for r in rows}
    assert got == {
        "b": (1, 1, False, [1, 2]),  # the fit's [2, 2] less the one not shown: an outer bound
        "c": (1, 2, True, [1, 3]),  # tied with b, the row above it
        "d": (3, 3, False, [3, 4]),  # b and c wholly above
        "p": (
            2,
            2,
            False,
            [2, 4],
        ),  # provisional: counts for no one, never first while a rated model is shown
    }
    alone = [row("p", 1300, 1100, None, provisional=True)]
    ranks_among(alone)
    assert (alone[0]["rank_ub"], alone[0]["rank"]) == (1, 1)  # no rated model shown: the rule as in evalcore


@pytest.fixture
def arena(db):
    strengths = {"secret": 3.0, "alpha": 1.0, "beta": 0.0, "gamma": -1.0, "delta": -2.0}
    votes_create(strengths, 1500, seed=5, tie_rate=0.05)
    LanguageModel.objects.filter(name="secret").update(organisation="Acme", public=False, name_withheld=True)
    LanguageModel.objects.filter(name="alpha").update(organisation="HuggingFace", open_weights=True)
    LanguageModel.objects.filter(name__in=["beta", "gamma"]).update(organisation="Acme")
    LanguageModel.objects.filter(name="delta").update(
        organisation="Acme", open_weights=True, retired_at="2026-11-01T00:00:00Z", retired_reason="superseded"
    )
    snapshots_refit(rounds=20, seed=1, min_votes=1)
    fit = {r["model"]: r["rank_ub"] for r in RatingSnapshot.objects.get(method="bt", category="overall").rows}
    assert fit == {"secret": 1, "alpha": 2, "beta": 3, "gamma": 4, "delta": 5}  # clearly apart
    return fit


def board_ranks(client, query: str) -> dict[str, int]:
    html = client.get(f"/leaderboard/arena/{query}").content.decode()
    table = html[html.index('<table class="arena-board">') :]
    found = {}
    for model, cells in re.findall(r'data-model="([^"]+)"(.*?)</tr>', table, re.S):
        found[model] = int(re.search(r'<td class="num">(\d+)', cells).group(1))
    return found


def test_ranks_among_counts_as_the_definition_says_on_random_rows():
    """The counts by bisection equal the definition's pairwise counts, ties, open sides and missing
    ratings included (the board ranks 200 models per request: n log n, not n squared)."""
    rng = random.Random(7)
    for _ in range(200):
        rows = []
        for k in range(rng.randint(1, 30)):
            rating = None if rng.random() < 0.05 else float(round(rng.gauss(1000, 40)))
            width = rng.choice([0, 5, 20])
            low = None if rating is None or rng.random() < 0.1 else rating - width
            high = None if rating is None or rng.random() < 0.1 else rating + width
            rows.append(row(f"m{k}", rating, low, high, provisional=rng.random() < 0.2))
        rated = [r for r in rows if not r["provisional"]] or rows
        expected = [
            (
                1 + sum(1 for r in rated if r["ci_low"] is not None and x["ci_high"] is not None and r["ci_low"] > x["ci_high"]),
                1 + sum(1 for r in rated if x["rating"] is not None and r["rating"] is not None and r["rating"] > x["rating"]),
            )
            for x in rows
        ]
        floor = 2 if any(not r["provisional"] for r in rows) else 1
        expected = [(max(a, floor), max(b, floor)) if x["provisional"] else (a, b) for (a, b), x in zip(expected, rows)]
        ranks_among(rows)
        assert [(r["rank_ub"], r["rank"]) for r in rows] == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", {"alpha": 1, "beta": 2, "gamma": 3}),  # the hidden model above them all pushes no one down
        ("?retired=yes", {"alpha": 1, "beta": 2, "gamma": 3, "delta": 4}),
        ("?organisation=Acme", {"beta": 1, "gamma": 2}),
        ("?organisation=Acme&retired=yes", {"beta": 1, "gamma": 2, "delta": 3}),
        ("?open_weights=yes&retired=yes", {"alpha": 1, "delta": 2}),
    ],
)
def test_the_board_and_the_api_rank_among_the_models_shown(client, arena, query, expected):
    assert board_ranks(client, query) == expected
    api = client.get(f"/api/ratings/{query}").json()["rows"]
    assert {r["model"]: r["rank_ub"] for r in api} == expected
    assert all(r["rank"] >= r["rank_ub"] for r in api)
    html = client.get(f"/leaderboard/arena/{query}").content.decode()
    assert "ranks are among the models shown" in html


def test_the_snapshot_api_ranks_without_the_hidden_model(client, arena):
    snapshot = RatingSnapshot.objects.get(method="bt", category="overall")
    rows = client.get(f"/api/snapshots/{snapshot.pk}/").json()["rows"]
    assert {r["model"]: r["rank_ub"] for r in rows} == {"alpha": 1, "beta": 2, "gamma": 3, "delta": 4}


def test_the_model_page_history_ranks_among_public_models(client, arena):
    assert RatingPoint.objects.get(model="alpha", method="bt", category="overall").rank == 2  # as stored
    assert [p["rank"] for p in rating_history("alpha")] == [1]
    assert [p["rank"] for p in rating_history("gamma")] == [3]
    html = client.get("/leaderboard/arena/models/alpha/").content.decode()
    history = html[html.index('<table class="arena-history">') :]
    assert re.search(r'<td class="num">1</td><td>', history)


def test_tied_with_names_only_the_models_shown(client, db):
    """A retired model hidden by default, or one a filter leaves out, is not named in "tied with" beside a
    row (the walk-through saw "tied with smollm2-135m-t0.9" after that model was retired and hidden)."""
    votes_create({"alpha": 0.0, "beta": 0.05, "gamma": -0.05}, 240, seed=3, tie_rate=0.1)
    LanguageModel.objects.filter(name="beta").update(retired_at="2026-11-01T00:00:00Z", retired_reason="superseded")
    LanguageModel.objects.filter(name="gamma").update(organisation="Acme")
    snapshots_refit(rounds=20, seed=1, min_votes=1)
    fitted = {r["model"]: r["tied_with"] for r in RatingSnapshot.objects.get(method="bt", category="overall").rows}
    assert "beta" in fitted["alpha"] and "gamma" in fitted["alpha"]  # the fit: all three overlap
    for query, hidden in (("", "beta"), ("?retired=yes&organisation=Acme", "alpha")):
        rows = client.get(f"/api/ratings/{query}").json()["rows"]
        assert rows and all(hidden not in r["tied_with"] for r in rows)
        html = client.get(f"/leaderboard/arena/{query}").content.decode()
        table = html[html.index('<table class="arena-board">') :]
        assert f"tied with {hidden}" not in table and f", {hidden}" not in table
    rows = client.get("/api/ratings/?retired=yes").json()["rows"]
    assert "beta" in {name for r in rows for name in r["tied_with"]}  # shown: named again
