"""Issue 31 §2-3 through the site: models described and filterable on the board and in /api/ratings/ (the
same rows for the same query), retired models hidden by default with a toggle, models not shown publicly
never shown (a withheld name nowhere in public output), the model page with its rating history, the public
record of retirements, /api/models/ and models.csv, and hostile query parameters refused on both sides."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from arena.models import Battle, LanguageModel
from arena.models.catalogue import stand_in
from arena.publication.api import BattleSerializer
from arena.ratings import selectors as rating_selectors
from arena.ratings.live import live_refit
from arena.ratings.refit import snapshots_refit
from tests.arena.vote_data import T0, votes_create

pytestmark = pytest.mark.django_db

RETIRED_AT = datetime(2026, 11, 30, tzinfo=UTC)
SECRET = "secret-proto-7"


@pytest.fixture
def described(db):
    votes_create({"alpha": 1.0, "beta": 0.2, "gamma": -0.3, SECRET: 0.5, "epsilon": -1.0}, 900, seed=3)
    LanguageModel.objects.filter(name="alpha").update(
        organisation="HuggingFace", licence="apache-2.0", open_weights=True, parameter_count=135_000_000,
        knowledge_cutoff="2024-06", link="https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
    )  # fmt: skip
    LanguageModel.objects.filter(name="beta").update(organisation="Acme", licence="proprietary")
    LanguageModel.objects.filter(name="gamma").update(
        organisation="Acme",
        licence="mit",
        open_weights=True,
        retired_at=RETIRED_AT,
        retired_reason="superseded by beta",
    )
    LanguageModel.objects.filter(name=SECRET).update(organisation="Acme", public=False, name_withheld=True)
    LanguageModel.objects.filter(name="epsilon").update(organisation="Solo", public=False)
    snapshots_refit(rounds=20, seed=1)
    live_refit()  # the live table too shows only public models
    return {m.name: m for m in LanguageModel.objects.all()}


def board_models(client, query=""):
    response = client.get(f"/leaderboard/arena/{query}")
    assert response.status_code == 200, response.content[:500]
    html = response.content.decode()
    table = html[html.index('<table class="arena-board">') :] if '<table class="arena-board">' in html else ""
    return response, re.findall(r'<tr class="[^"]*" data-model="([^"]+)"', table)


def api_models(client, query=""):
    response = client.get(f"/api/ratings/{query}")
    assert response.status_code == 200, response.content[:500]
    return response.json(), [row["model"] for row in response.json()["rows"]]


FILTERS = [
    ("", {"alpha", "beta"}),
    ("?retired=yes", {"alpha", "beta", "gamma"}),
    ("?open_weights=yes", {"alpha"}),
    ("?open_weights=yes&retired=yes", {"alpha", "gamma"}),
    ("?open_weights=NO", {"beta"}),
    ("?organisation=acme", {"beta"}),
    ("?organisation=%20Acme%20&retired=yes", {"beta", "gamma"}),
    ("?licence=apache-2.0", {"alpha"}),
    ("?licence=gpl-3.0", set()),
]


@pytest.mark.parametrize(("query", "expected"), FILTERS)
def test_the_board_and_the_api_show_the_same_rows_for_the_same_filters(client, described, query, expected):
    _, shown = board_models(client, query)
    data, rows = api_models(client, query)
    assert set(shown) == set(rows) == expected
    assert SECRET not in json.dumps(data) and "epsilon" not in rows


def test_a_model_out_of_the_arena_keeps_its_description_among_thousands_of_scored_only_models(client, described):
    """The board and the API read the descriptions of the models a snapshot rates and of those that can
    hide or rename one (not the catalogue's scored-only models, one per submission): a model taken out of
    the arena without retirement is still described and filtered as before, and a scored-only model named
    like no rated one changes nothing."""
    from arena.catalogue.selectors import descriptions

    LanguageModel.objects.filter(name__in=["alpha", "beta"]).update(in_arena=False)
    LanguageModel.objects.bulk_create(
        [LanguageModel(name=f"scored-{k}", organisation="Acme", licence="apache-2.0", open_weights=True) for k in range(300)]
    )
    for query, expected in FILTERS:
        _, shown = board_models(client, query)
        data, rows = api_models(client, query)
        assert set(shown) == set(rows) == expected, query
        assert SECRET not in json.dumps(data)
    assert api_models(client, "?organisation=acme&retired=yes")[0]["rows"][0]["about"]["organisation"] == "Acme"
    everything = descriptions()
    some = descriptions(names={"alpha", "beta"})
    assert set(some) == {"alpha", "beta", "gamma", SECRET, "epsilon"}  # rated, retired or not public
    assert all(some[name] == everything[name] for name in some)
    LanguageModel.objects.create(name="newcomer", in_arena=True)  # battles now, not rated yet
    assert "newcomer" in descriptions(names=set()) and "scored-0" not in descriptions(names=set())


def test_the_board_describes_each_model_and_marks_retirements(client, described):
    response, _ = board_models(client, "?retired=yes")
    html = response.content.decode()
    table = html[html.index('<table class="arena-board">') :]  # the refit's table (the live one is above)
    alpha = table[table.index('data-model="alpha"') :].split("</tr>")[0]
    for text in ("HuggingFace", "apache-2.0", "135M", "2024-06", "huggingface.co/HuggingFaceTB", ">yes<"):
        assert text in alpha, text
    assert 'href="/leaderboard/arena/models/alpha/"' in alpha
    gamma = table[table.index('data-model="gamma"') :].split("</tr>")[0]
    assert 'data-retired="true"' in gamma and "retired 2026-11-30: superseded by beta" in gamma
    default, _ = board_models(client)
    assert "1 retired model hidden" in default.content.decode()
    assert 'id="arena-live"' in default.content.decode()
    for page in (html, default.content.decode()):
        assert SECRET not in page and "epsilon" not in page
    options = re.findall(r'<option value="([^"]*)"', html)
    assert {"HuggingFace", "Acme", "apache-2.0", "proprietary", "mit"} <= set(
        options
    ) and "Solo" not in options


def test_api_rows_carry_the_description(client, described):
    data, _ = api_models(client, "?retired=yes")
    about = {row["model"]: row["about"] for row in data["rows"]}
    assert about["alpha"]["parameter_count"] == 135_000_000 and about["alpha"]["open_weights"] is True
    assert about["gamma"]["retired_reason"] == "superseded by beta"
    assert about["gamma"]["retired_at"].startswith("2026-11-30")
    assert data["scale"]["model"] is None  # centred: no anchor set


HOSTILE = [
    "?organisation=%00Acme", "?organisation=Acme%0Aevil", "?organisation=" + "x" * 201, "?licence=%3Cscript%3E",
    "?open_weights=maybe", "?retired=1", "?retired=yes&retired=no", "?colour=red", "?licence=", "?organisation=%20%20",
]  # fmt: skip


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_parameters_are_refused_the_same_way_on_the_page_and_the_api(client, described, query):
    page = client.get(f"/leaderboard/arena/{query}")
    api = client.get(f"/api/ratings/{query}")
    if query in ("?licence=", "?organisation=%20%20"):  # blank: no filter, on both
        assert page.status_code == 200 and api.status_code == 200
        return
    assert page.status_code == 400 and api.status_code == 400, (page.status_code, api.status_code)
    message = page.content.decode()
    assert "cannot show that selection" in message
    assert any(
        name in json.dumps(api.json())
        for name in ("organisation", "licence", "open_weights", "retired", "colour")
    )


def test_a_withheld_name_appears_in_no_public_output(client, described):
    secret_pk = described[SECRET].pk
    outputs = {
        "votes.csv": b"".join(client.get("/api/votes.csv").streaming_content).decode(),
        "votes.jsonl": b"".join(client.get("/api/votes.jsonl").streaming_content).decode(),
        "snapshot": json.dumps(client.get(f"/api/snapshots/{rating_selectors.snapshot_latest('bt').id}/").json()),
        "ratings": json.dumps(client.get("/api/ratings/?retired=yes").json()),
        "models": json.dumps(client.get("/api/models/").json()),
        "retired page": client.get("/leaderboard/arena/retired/").content.decode(),
    }
    for name, text in outputs.items():
        assert SECRET not in text, name
    assert stand_in(secret_pk) in outputs["votes.csv"]  # the votes are there, under the stand-in
    snapshot = json.loads(outputs["snapshot"])
    assert {row["model"] for row in snapshot["rows"]} == {
        "alpha",
        "beta",
        "gamma",
    }  # not-public rows left out
    battle = Battle.objects.filter(model_a__name=SECRET).select_related("model_a", "model_b", "vote").first()
    assert BattleSerializer(battle).data["model_a"] == stand_in(secret_pk)  # published battles too
    assert client.get(f"/leaderboard/arena/models/{SECRET}/").status_code == 404
    assert client.get("/leaderboard/arena/models/epsilon/").status_code == 404


def test_the_public_record_of_retirements_and_unreleased_models(client, described):
    response = client.get("/leaderboard/arena/retired/")
    assert response.status_code == 200
    html = response.content.decode()
    retired = html[html.index('id="retired-models"') : html.index('id="hidden-models"')]
    assert "gamma" in retired and "2026-11-30" in retired and "superseded by beta" in retired
    hidden = html[html.index('id="hidden-models"') :]
    assert "epsilon" in hidden and "name withheld at the owner's request" in hidden
    by_org = html[html.index('id="hidden-by-organisation"') :]
    assert re.search(r"<td>Acme</td><td class=\"num\">1</td>", by_org) and re.search(
        r"<td>Solo</td><td class=\"num\">1</td>", by_org
    )
    first = datetime.now(UTC).strftime("%Y-%m-%d")  # the battles were created by this test
    assert first in hidden  # dates of the battles
    assert client.get("/leaderboard/arena/retired/?x=1").status_code == 400


def test_models_export_lists_public_models_with_their_description(client, described):
    rows = {row["model"]: row for row in client.get("/api/models/").json()}
    assert set(rows) == {"alpha", "beta", "gamma"}
    assert (
        rows["gamma"]["retired_reason"] == "superseded by beta" and rows["alpha"]["licence"] == "apache-2.0"
    )
    response = client.get("/api/models.csv")
    assert response["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["model"] for r in table] == ["alpha", "beta", "gamma"]
    assert table[0]["open_weights"] == "yes" and table[0]["parameter_count"] == "135000000"
    assert table[2]["retired_at"].startswith("2026-11-30")
    assert client.get("/api/models.csv?x=1").status_code == 400


def test_the_model_page_charts_its_rating_across_refits_and_marks_a_change_of_anchor(
    client, described, settings
):
    votes_create({"alpha": 1.0, "beta": 0.2}, 100, seed=9, start=T0 + timedelta(days=2))
    settings.ARENA_ANCHOR_MODEL, settings.ARENA_ANCHOR_RATING = "beta", 1100.0
    snapshots_refit(rounds=20, seed=1)
    response = client.get("/leaderboard/arena/models/alpha/")
    assert response.status_code == 200
    html = response.content.decode()
    figure = json.loads(
        re.search(r'<script id="arena-history" type="application/json">(.*?)</script>', html, re.S).group(1)
    )
    trace = figure["history"]["data"][0]
    assert len(trace["x"]) == 2  # one point per stored refit
    ratings = [row["rating"] for row in (rating_selectors.snapshot_latest("bt").rows) if row["model"] == "alpha"]
    assert trace["y"][-1] == pytest.approx(ratings[0], abs=1e-4)
    assert figure["history"]["layout"]["shapes"], "the change of anchor is drawn"
    assert "The scale changed" in html and "beta at 1100" in html
    board = client.get("/leaderboard/arena/").content.decode()
    assert "Ratings are anchored: beta is held at 1100 (in every bootstrap round" in board
    assert client.get("/api/ratings/").json()["scale"]["model"] == "beta"
    assert "HuggingFace" in html and "apache-2.0" in html
    gamma = client.get("/leaderboard/arena/models/gamma/").content.decode()
    assert "retired 2026-11-30: superseded by beta" in gamma
    assert client.get("/leaderboard/arena/models/nobody/").status_code == 404
    hostile = client.get("/leaderboard/arena/models/%3Cscript%3Ealert(1)%3C%2Fscript%3E/")
    assert hostile.status_code == 404 and "<script>alert" not in hostile.content.decode()
    assert client.get("/leaderboard/arena/models/" + "x" * 5000 + "/").status_code == 404
    assert client.get("/leaderboard/arena/models/alpha/?method=elo").status_code == 400
    assert client.get("/leaderboard/arena/models/alpha/?category=no_ties").status_code == 200
