"""Every published rating surface applies the catalogue's one rule: a model not shown publicly (tested but
never shown, or withheld at its owner's request) has no published rating, win rate or battle count, under
its name or a stand-in: not in /api/ratings/, /api/ratings/live/, /api/snapshots/<id>/ (rows, matrices, Elo
state), the board's figures, nor the data release's ratings.parquet. Its votes stay in the vote exports
(the others' ratings are reproduced from them), a withheld name there as its stand-in."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from django.utils import timezone

from arena.catalogue.selectors import descriptions, extra_public
from arena.models import LanguageModel, RatingSnapshot
from arena.models.catalogue import stand_in
from arena.publication.holds import battles_moderate
from arena.publication.releases import release_build
from arena.ratings.live import live_refit
from arena.ratings.refit import snapshots_refit
from leaderboard.judging.selectors import judge_scores
from leaderboard.judging.services import judge_config_save
from leaderboard.models import JudgeConfig, JudgeRun
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

SECRET = "secret-proto-9"  # withheld at its owner's request
UNSHOWN = "epsilon-unshown"  # tested, not shown, name not withheld
PUBLIC = {"alpha", "beta", "gamma"}


@pytest.fixture
def arena(settings):
    settings.ARENA_PUBLISH_DELAY_S = 3600
    strengths = {"alpha": 1.0, "beta": 0.2, "gamma": -0.3, SECRET: 0.5, UNSHOWN: -1.0}
    votes_create(strengths, 600, seed=4, start=timezone.now() - timedelta(days=2), with_turns=True)
    LanguageModel.objects.filter(name=SECRET).update(organisation="Acme", public=False, name_withheld=True)
    LanguageModel.objects.filter(name=UNSHOWN).update(organisation="Solo", public=False)
    battles_moderate()
    snapshots_refit(rounds=10, seed=1, elo_orders=4, min_votes=1)
    live_refit()
    return stand_in(LanguageModel.objects.get(name=SECRET).pk)


def assert_no_hidden_model(text: str, label: str, secret_stand_in: str) -> None:
    for name in (SECRET, UNSHOWN, secret_stand_in):
        assert name not in text, f"{name} in {label}"


def test_the_snapshot_api_publishes_no_rating_of_a_hidden_model(client, arena):
    assert RatingSnapshot.objects.count() >= 3
    for snapshot in RatingSnapshot.objects.all():
        response = client.get(f"/api/snapshots/{snapshot.pk}/")
        assert response.status_code == 200
        data = response.json()
        assert_no_hidden_model(json.dumps(data), f"snapshot {snapshot.method}/{snapshot.category}", arena)
        assert {row["model"] for row in data["rows"]} <= PUBLIC
        extra = data["extra"]
        if "models" in extra:  # the matrices: square, one row and column per public model
            assert set(extra["models"]) <= PUBLIC and SECRET in json.dumps(snapshot.extra)
            for key in ("win_rate", "battles", "predicted"):
                assert len(extra[key]) == len(extra["models"]) and all(
                    len(r) == len(extra["models"]) for r in extra[key]
                )
        if "elo_state" in extra:
            assert set(extra["elo_state"]["ratings"]) <= PUBLIC


def test_a_submatrix_keeps_the_public_cells_as_stored(arena):
    snapshot = RatingSnapshot.objects.get(method="bt", category="overall")
    public = extra_public(snapshot.extra, descriptions())
    stored = snapshot.extra["models"]
    for i, a in enumerate(public["models"]):
        for j, b in enumerate(public["models"]):
            assert public["win_rate"][i][j] == snapshot.extra["win_rate"][stored.index(a)][stored.index(b)]
    before = {
        "vote_count": 3,
        "rows": [{"model": SECRET}, {"model": "alpha", "tied_with": [UNSHOWN, "beta"]}],
    }
    cleaned = extra_public({"before_voter_exclusion": before}, descriptions())["before_voter_exclusion"]
    assert cleaned["rows"] == [{"model": "alpha", "tied_with": ["beta"]}]


def test_the_ratings_apis_and_the_board_figures_name_no_hidden_model(client, arena):
    for url in ("/api/ratings/?retired=yes", "/api/ratings/?method=style", "/api/ratings/?method=elo",
                "/api/ratings/live/"):  # fmt: skip
        response = client.get(url)
        assert response.status_code == 200, url
        assert_no_hidden_model(response.content.decode(), url, arena)
    for query in ("", "?method=style", "?retired=yes"):
        html = client.get(f"/leaderboard/arena/{query}").content.decode()
        figures = re.search(r'<script id="arena-figures" type="application/json">(.*?)</script>', html, re.S)
        assert figures is not None, query
        heatmap = json.loads(figures.group(1))["predicted"]["data"][0]
        assert heatmap["x"] and set(heatmap["x"]) <= PUBLIC
        assert_no_hidden_model(html, f"board {query}", arena)


def test_the_release_ratings_leave_hidden_models_out_and_the_votes_keep_them_masked(client, arena, tmp_path):
    release = release_build(out=tmp_path)
    data = tmp_path / release.version / "data"
    ratings = pq.read_table(data / "ratings.parquet").to_pylist()
    assert ratings and {r["model"] for r in ratings} <= PUBLIC
    assert_no_hidden_model(json.dumps(ratings), "ratings.parquet", arena)
    votes = pq.read_table(data / "votes.parquet").to_pylist()
    names = {r["model_a"] for r in votes} | {r["model_b"] for r in votes}
    assert arena in names and SECRET not in names and UNSHOWN in names  # others' ratings are fitted with them
    battles = pq.read_table(data / "battles.parquet").to_pylist()
    assert SECRET not in json.dumps(battles, default=str)
    card = (tmp_path / release.version / "README.md").read_text()
    assert SECRET not in card and "has no rating row" in card
    csv_text = b"".join(client.get("/api/votes.csv").streaming_content).decode()
    assert arena in csv_text and SECRET not in csv_text
    jsonl = b"".join(client.get("/api/votes.jsonl").streaming_content).decode()
    assert arena in jsonl and SECRET not in jsonl
    battles_api = client.get("/api/battles/?limit=500").content.decode()
    assert arena in battles_api and SECRET not in battles_api
    for url in ("/api/models/", "/api/models.csv", "/leaderboard/arena/retired/"):
        text = client.get(url).content.decode()
        assert SECRET not in text and arena not in text, url


def test_judge_scores_lend_no_arena_rating_to_a_hidden_model(arena, tmp_path):
    """The judge page (and its API) joins arena ratings by name: only models shown publicly lend one."""
    baseline = LanguageModel.objects.get(name="gamma")
    config = judge_config_save(JudgeConfig(name="j", judge_backend="hf", judge_model_args={"path": str(tmp_path)},
                                           protocol_name="alpacaeval-logprob", baseline=baseline))  # fmt: skip
    for name in ("alpha", UNSHOWN):
        JudgeRun.objects.create(config=config, model=LanguageModel.objects.get(name=name), status="FINISHED",
                                protocol_sha256=config.protocol_sha256, instructions_sha256=config.instructions_sha256,
                                results={"win_rate": 60.0, "n": 12})  # fmt: skip
    arena_of = {r["model"]: r["arena"] for r in judge_scores(config)}
    assert arena_of["alpha"] is not None and arena_of["gamma"] is not None
    assert arena_of[UNSHOWN] is None  # judged (its name is the judge's business), but no arena rating shown
