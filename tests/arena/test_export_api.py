"""Vote exports (CSV, JSON Lines) and the read API: round trip through `python -m evalcore rate`,
streaming under WSGI and ASGI, voted battles only, and clear 400s for bad parameters."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import warnings

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from arena.models import Battle, LanguageModel, RatingSnapshot, Turn, Vote
from arena.publication.holds import battles_moderate
from arena.ratings.refit import snapshots_refit
from arena.votes import exports
from evalcore.ratings import read_battles
from tests.arena.vote_data import votes_create
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.django_db

STRENGTHS = {"alpha": 0.8, "beta": 0.0, "gamma": -0.5, "delta": -0.6}
ROUNDS = 30
SEED = 7


def rate(path, method: str, rounds: int) -> list[dict]:
    argv = [sys.executable, "-m", "evalcore", "rate", str(path), "--method", method]
    argv += ["--bootstrap", str(rounds), "--seed", str(SEED), "--format", "json"]
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["ratings"]


def body(response) -> bytes:
    assert response.streaming
    return b"".join(response.streaming_content)


@pytest.fixture
def voted(db):
    votes = votes_create(STRENGTHS, 1100, seed=3, tie_rate=0.15, verbose={"beta": 0.5})
    votes_create(STRENGTHS, 20, seed=4, counted=False, start=votes[-1].created_at.replace(year=2027))
    return votes


def test_csv_export_round_trips_through_evalcore_rate(client, voted, tmp_path):
    snapshots_refit(rounds=ROUNDS, seed=SEED, elo_orders=50)
    response = client.get("/api/votes.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    chunks = list(response.streaming_content)
    assert len(chunks) >= 2  # streamed in chunks of exports.CHUNK_ROWS rows
    path = tmp_path / "votes.csv"
    path.write_bytes(b"".join(chunks))
    header = path.read_text().splitlines()[0].split(",")
    assert header[:8] == [
        "question_id",
        "model_a",
        "model_b",
        "winner",
        "tstamp",
        "turn",
        "language",
        "anony",
    ]
    assert len(read_battles(path)) == 1100  # the 20 uncounted votes are not exported
    for method, rounds in (("bt", ROUNDS), ("style", ROUNDS), ("elo", 50)):
        snapshot = RatingSnapshot.objects.get(method=method, category="overall")
        assert snapshot.settings["prior"] == 0.0
        expected = {row["model"]: row for row in rate(path, method, rounds)}
        assert [r["model"] for r in snapshot.rows] == list(expected), method
        for row in snapshot.rows:
            for key in ("rating", "ci_low", "ci_high"):
                assert row[key] == pytest.approx(expected[row["model"]][key], abs=1e-6), (method, key)
            assert row["rank_ub"] == expected[row["model"]]["rank_ub"]
            assert row["battles"] == expected[row["model"]]["battles"]


def test_jsonl_export_has_fastchat_fields_and_style_metadata(client, voted):
    response = client.get("/api/votes.jsonl")
    assert response.status_code == 200
    records = [json.loads(line) for line in body(response).decode().splitlines()]
    assert len(records) == 1100
    first = records[0]
    assert {"model_a", "model_b", "winner", "tstamp", "turn", "language", "anony"} <= set(first)
    assert first["anony"] is True and first["language"] == "en"
    assert first["conv_metadata"]["sum_assistant_a_tokens"] == first["tokens_a"]
    assert sum(first["conv_metadata"]["list_count_b"].values()) == first["list_items_b"]
    assert [r["tstamp"] for r in records] == sorted(r["tstamp"] for r in records)
    battles = read_battles(io.StringIO(body(client.get("/api/votes.jsonl")).decode()), format="jsonl")
    assert battles.style_a is not None and len(battles) == 1100


def test_csv_export_streams_under_asgi_without_buffering(voted):
    async def fetch():
        response = await AsyncClient().get("/api/votes.csv")
        return response, [chunk async for chunk in response]

    with warnings.catch_warnings():
        # Django warns (and buffers the whole body) when it must serve a sync iterator under ASGI.
        warnings.filterwarnings("error", message="StreamingHttpResponse must consume")
        response, chunks = async_to_sync(fetch)()
    assert response.status_code == 200 and len(chunks) >= 2
    rows = list(csv.DictReader(io.StringIO(b"".join(chunks).decode())))
    assert len(rows) == 1100 and rows[0]["tokens_a"].isdigit()


def test_exports_refuse_parameters_and_other_methods(client):
    refused = client.get("/api/votes.csv?limit=10")
    assert refused.status_code == 400 and "no parameters" in refused.json()["detail"]
    assert client.post("/api/votes.jsonl").status_code == 405


def test_exports_ignore_the_accept_header(client, voted):
    response = client.get("/api/votes.csv", HTTP_ACCEPT="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8"
    assert body(response).startswith(b"question_id,model_a,model_b,winner")


def test_empty_export_is_a_header_only(client):
    text = body(client.get("/api/votes.csv")).decode()
    assert text.splitlines() == [",".join(exports.EXPORT_COLUMNS)]


def test_battles_api_lists_only_voted_battles_with_names_and_turns(client):
    votes = votes_create(STRENGTHS, 12, seed=5, with_turns=True, turn_count=[1, 2])
    battles_moderate()  # the refit task moderates first: only moderated battles are published
    snapshots_refit(rounds=ROUNDS)  # publishes them: months old, covered by a snapshot made now
    models = list(LanguageModel.objects.all()[:2])
    pending = Battle.objects.create(model_a=models[0], model_b=models[1], session_hash="x", ip_hash="y")
    Turn.objects.create(battle=pending, index=0, prompt="secret")
    data = client.get("/api/battles/").json()
    assert data["count"] == 12
    ids = {b["public_id"] for b in data["results"]}
    assert pending.public_id.hex not in ids
    one = data["results"][0]
    assert one["model_a"] in STRENGTHS and one["winner"] in Vote.Winner.values
    assert len(one["turns"]) == one["turn_count"] and one["turns"][0]["answer_a"].startswith("answer a")
    assert "session_hash" not in one and "ip_hash" not in one
    assert client.get(f"/api/battles/{pending.public_id.hex}/").status_code == 404
    detail = client.get(f"/api/battles/{votes[0].battle.public_id.hex}/")
    assert detail.status_code == 200 and detail.json()["public_id"] == votes[0].battle.public_id.hex
    assert client.get("/api/battles/?limit=5&offset=10").json()["results"].__len__() == 2
    assert client.get("/api/battles/?model=alpha").json()["count"] == sum(
        "alpha" in (v.model_a.name, v.model_b.name) for v in votes
    )
    assert client.get("/api/battles/?winner=tie").json()["count"] == sum(v.winner == "tie" for v in votes)
    assert client.get("/api/battles/?counted=false").json()["count"] == 0
    assert client.get("/api/battles/?since=2030-01-01T00:00:00Z").json()["count"] == 0


@pytest.mark.parametrize(
    "query",
    [
        "limit=100000", "limit=0", "limit=abc", "offset=-1", "offset=1e3", "winner=everyone",
        "counted=maybe", "since=yesterday", "colour=red", "model=a%00b", "limit=5&limit=6",
        "model=" + "x" * 300,
    ],
)  # fmt: skip
def test_battles_api_refuses_bad_parameters_with_a_400(client, query):
    response = client.get(f"/api/battles/?{query}")
    assert response.status_code == 400, response.content
    assert response.json()  # a JSON body naming the problem


def test_snapshot_and_ratings_api(client):
    votes_create(STRENGTHS, 120, seed=6)
    snapshots_refit(rounds=ROUNDS)
    listing = client.get("/api/snapshots/?method=style").json()
    assert listing["count"] == 5  # overall, language:en, multi_turn, long_prompt, no_ties
    assert all(s["method"] == "style" for s in listing["results"])
    assert "rows" not in listing["results"][0]
    snap_id = client.get("/api/snapshots/?method=bt&category=overall").json()["results"][0]["id"]
    detail = client.get(f"/api/snapshots/{snap_id}/").json()
    assert detail["rows"][0]["model"] == "alpha" and "predicted" in detail["extra"]
    ratings = client.get("/api/ratings/").json()
    assert (
        ratings["method"] == "bt" and ratings["category"] == "overall" and ratings["snapshot_id"] == snap_id
    )
    assert ratings["vote_count"] == 120 and ratings["rows"][0]["ci_low"] < ratings["rows"][0]["ci_high"]
    assert client.get("/api/ratings/?method=elo").json()["method"] == "elo"
    assert client.get("/api/ratings/?method=magic").status_code == 400
    missing = client.get("/api/ratings/?category=language:xx")
    assert missing.status_code == 404 and "overall" in missing.json()["detail"]
    assert client.get("/api/snapshots/999999/").status_code == 404
    assert client.get("/api/snapshots/?limit=99999").status_code == 400


def test_openapi_schema_lists_the_endpoints(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    assert {"/api/battles/", "/api/snapshots/", "/api/ratings/", "/api/votes.csv", "/api/votes.jsonl"} <= set(
        paths
    )
    assert "text/csv" in paths["/api/votes.csv"]["get"]["responses"]["200"]["content"]


def test_model_names_cannot_become_spreadsheet_formulas(client, db):
    votes_create({"=cmd|' /C calc'!A0": 0.0, "@SUM(1)": 0.1}, 10, seed=1)
    rows = list(csv.DictReader(io.StringIO(body(client.get("/api/votes.csv")).decode())))
    names = {row["model_a"] for row in rows} | {row["model_b"] for row in rows}
    assert names == {"'=cmd|' /C calc'!A0", "'@SUM(1)"}
    assert all(float(row["tstamp"]) > 0 for row in rows)
