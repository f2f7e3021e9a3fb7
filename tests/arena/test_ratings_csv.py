"""``/api/ratings/?format=csv``: the JSON's rows and filters as CSV, one row per model, every cell through
evalcore.boundary.csvsafe; hostile or malformed parameters get a clear JSON 400 (a missing snapshot a JSON
404), never a 500 or a CSV body holding an error."""

from __future__ import annotations

import csv
import io
import json

import pytest

from arena.models import LanguageModel
from arena.ratings.api import RATINGS_CSV_COLUMNS
from arena.ratings.refit import snapshots_refit
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

HOSTILE = "=HYPERLINK(\"http://evil\")"
STRENGTHS = {"top": 1.2, "mid": 0.0, HOSTILE: -0.3, "@low": -1.2}


@pytest.fixture
def rated(db):
    votes_create(STRENGTHS, 400, seed=3)
    snapshots_refit(rounds=20, provisional_votes=0)


def rows_of(response) -> list[dict]:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = response.content.decode()
    assert text.splitlines()[0] == ",".join(RATINGS_CSV_COLUMNS)
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize("method", ["bt", "style", "elo"])
def test_the_csv_has_the_jsons_rows(client, rated, method):
    data = client.get(f"/api/ratings/?method={method}").json()
    response = client.get(f"/api/ratings/?method={method}&format=csv")
    assert f'filename="podium_ratings_{method}_overall.csv"' in response["Content-Disposition"]
    rows = rows_of(response)
    assert [r["model"].removeprefix("'") for r in rows] == [r["model"] for r in data["rows"]]
    assert len(rows) == 4
    for got, want in zip(rows, data["rows"]):
        assert float(got["rating"]) == pytest.approx(want["rating"], abs=1e-4)
        assert float(got["ci_low"]) == pytest.approx(want["ci_low"], abs=1e-4)
        assert float(got["ci_high"]) == pytest.approx(want["ci_high"], abs=1e-4)
        assert int(got["rank"]) == want["rank_ub"] and int(got["battles"]) == want["battles"]
        assert got["provisional"] == ("yes" if want["provisional"] else "no")
        assert (got["method"], got["category"], int(got["snapshot_id"])) == (method, "overall", data["snapshot_id"])
        assert int(got["vote_count"]) == data["vote_count"] == 400


def test_model_names_cannot_become_formulas(client, rated):
    rows = rows_of(client.get("/api/ratings/?format=csv"))
    names = {r["model"] for r in rows}
    assert "'" + HOSTILE in names and "'@low" in names  # shown as text by spreadsheets
    assert not any(name.startswith(("=", "@", "+", "-")) for name in names)
    tied = [r["tied_with"] for r in rows if r["tied_with"]]
    assert all(not t.startswith(("=", "@")) for t in tied)


def test_the_accept_header_also_asks_for_csv(client, rated):
    assert len(rows_of(client.get("/api/ratings/", HTTP_ACCEPT="text/csv"))) == 4


def test_the_csv_takes_the_boards_filters(client, rated):
    LanguageModel.objects.filter(name="top").update(organisation="Acme", licence="MIT", open_weights=True)
    LanguageModel.objects.filter(name="mid").update(organisation="Other", licence="MIT")
    json_rows = client.get("/api/ratings/?organisation=acme").json()["rows"]
    rows = rows_of(client.get("/api/ratings/?organisation=acme&format=csv"))
    assert [r["model"] for r in rows] == [r["model"] for r in json_rows] == ["top"]
    assert (rows[0]["organisation"], rows[0]["licence"], rows[0]["open_weights"], rows[0]["rank"]) == ("Acme", "MIT", "yes", "1")


def test_an_empty_snapshot_is_a_header_only(client, db):
    votes_create({"a": 0.0, "b": 0.0}, 3)
    snapshots_refit(rounds=10)  # too few votes: the snapshot has no rows
    assert rows_of(client.get("/api/ratings/?format=csv")) == []


@pytest.mark.parametrize(
    "query, status, says",
    [
        ("format=csv&method=elo2", 400, "method"),
        ("format=csv&category=%3Cscript%3E", 400, "category"),
        ("format=csv&category=" + "a" * 100, 400, "category"),
        ("format=csv&limit=5", 400, "unknown parameter"),
        ("format=csv&format=json", 400, "format"),
        ("format=csv&open_weights=maybe", 400, "open_weights"),
        ("format=csv&organisation=%00", 400, "organisation"),
        ("format=xlsx", 400, "not served here"),
        ("format=csv%00", 400, "not served here"),
        ("format=csv&category=coding", 404, "no bt snapshot for category 'coding'"),
    ],
)  # fmt: skip
def test_hostile_parameters_get_a_clear_json_error(client, rated, query, status, says):
    response = client.get(f"/api/ratings/?{query}")
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    assert says in json.dumps(response.json())
