"""The arena leaderboard page: reads snapshots only, marks ties, charts from the local plotly.js."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import plotly
import pytest

from arena.models import RatingSnapshot
from arena.ratings.refit import snapshots_refit
from leaderboard.arena_board.charts import HEATMAP_MODELS, snapshot_figures
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

ROUNDS = 30


def figures_of(html: str) -> dict:
    match = re.search(r'<script id="arena-figures" type="application/json">(.*?)</script>', html, re.S)
    assert match, "no figure data in the page"
    return json.loads(match.group(1))


def test_empty_state_before_any_refit(client):
    response = client.get("/leaderboard/arena/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="arena-empty"' in html and "No ratings yet" in html
    assert "plotly-" not in html  # no charts, no script


def test_too_few_votes_says_how_many_are_needed(client):
    votes_create({"a": 0.0, "b": 0.0}, 3)
    snapshots_refit(rounds=ROUNDS, min_votes=10)
    html = client.get("/leaderboard/arena/").content.decode()
    assert "3 votes" in html and "ratings appear from 10" in html


@pytest.fixture
def rated(db):
    votes_create({"top": 1.5, "twin-a": 0.0, "twin-b": 0.01, "low": -1.5}, 500, seed=2)
    snapshots_refit(rounds=ROUNDS, provisional_votes=0)  # ~250 votes each: keep them rated here


def test_table_intervals_elo_and_statistical_ties(client, rated, django_assert_max_num_queries):
    before = RatingSnapshot.objects.count()
    # Snapshots, the catalogue and each category's vote count now (the live board's and the base's rows,
    # one small query): no vote is read, nothing is fitted.
    with django_assert_max_num_queries(8):
        response = client.get("/leaderboard/arena/")
    assert response.status_code == 200
    html = response.content.decode()
    bt = RatingSnapshot.objects.get(method="bt", category="overall")
    models_in_order = re.findall(r'<tr class="[^"]*" data-model="([^"]+)"', html)
    assert models_in_order == [r["model"] for r in bt.rows]
    assert models_in_order[0] == "top" and models_in_order[-1] == "low"
    twin_rows = [r for r in bt.rows if r["model"].startswith("twin")]
    assert twin_rows[1]["tied_with_above"]
    assert html.count('class="tied"') >= 1 and "statistically tied" in html
    low, high = round(bt.rows[0]["ci_low"]), round(bt.rows[0]["ci_high"])
    assert f"{low} – {high}" in html
    assert "Online Elo" in html and "Why Elo differs from Bradley-Terry" in html
    assert RatingSnapshot.objects.count() == before  # nothing written by a page view


def test_charts_come_from_the_server_and_plotly_js_from_the_package(client, rated):
    html = client.get("/leaderboard/arena/").content.decode()
    figures = figures_of(html)
    assert set(figures) == {"ratings", "predicted", "battles"}
    bt = RatingSnapshot.objects.get(method="bt", category="overall")
    whiskers = figures["ratings"]["data"][0]["error_x"]
    best = bt.rows[0]
    assert whiskers["array"][-1] == pytest.approx(best["ci_high"] - best["rating"])  # best plotted on top
    assert figures["predicted"]["data"][0]["type"] == "heatmap"
    assert figures["battles"]["data"][0]["z"][0][1] == bt.extra["battles"][0][1]
    src = re.search(r'<script src="([^"]+plotly[^"]+)"', html).group(1)
    assert src == f"/leaderboard/plotly-{plotly.__version__}.min.js"
    assert not re.search(r'src="https?://', html)  # the site runs offline: no CDN
    script = client.get(src, HTTP_ACCEPT_ENCODING="gzip")
    assert script.status_code == 200 and script["Content-Encoding"] == "gzip"
    assert "immutable" in script["Cache-Control"]
    package_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert gzip.decompress(script.content) == package_js.read_bytes()
    assert client.get("/leaderboard/plotly-0.0.1.min.js").status_code == 404


def test_style_toggle_and_category_select(client, rated):
    html = client.get("/leaderboard/arena/?method=style").content.decode()
    assert "Style-controlled Bradley-Terry" in html and "Style coefficients" in html
    assert re.search(r'value="style" checked', html)
    style = RatingSnapshot.objects.get(method="style", category="overall")
    assert figures_of(html)["ratings"]["data"][0]["x"][-1] == pytest.approx(style.rows[0]["rating"])
    html = client.get("/leaderboard/arena/?category=language:en").content.decode()
    assert '<option value="language:en" selected>' in html
    assert client.get("/leaderboard/arena/?category=language:xx").status_code == 404


@pytest.mark.parametrize(
    "query",
    ["method=elo", "method=%3Cscript%3E", "category=%3Cscript%3Ealert(1)%3C/script%3E", "sort=rating",
     "category=" + "a" * 100],
)  # fmt: skip
def test_bad_parameters_get_a_400_page(client, query):
    response = client.get(f"/leaderboard/arena/?{query}")
    assert response.status_code == 400
    html = response.content.decode()
    assert "cannot show that selection" in html and "<script>alert" not in html


def test_heatmaps_show_the_top_models_of_a_large_arena():
    """200 models make a 1 MB, unreadable matrix: the heatmaps keep the 20 best-rated, in matrix order."""
    models = [f"m{k:03d}" for k in range(30)]
    rows = [{"model": name, "rating": 1000 + (k * 7919) % 30, "ci_low": None, "ci_high": None}
            for k, name in enumerate(models)]  # fmt: skip
    extra = {
        "models": models,
        "predicted": [[0.5 + (i - j) / 100 for j in range(30)] for i in range(30)],
        "battles": [[i * 100 + j for j in range(30)] for i in range(30)],
    }
    html = str(snapshot_figures(rows, extra, "Bradley-Terry"))
    figures = json.loads(html[html.index(">") + 1 : html.rindex("<")])
    best = sorted(rows, key=lambda r: -r["rating"])[:HEATMAP_MODELS]
    kept = [m for m in models if m in {r["model"] for r in best}]
    battles = figures["battles"]["data"][0]
    assert battles["x"] == kept and battles["y"] == kept and len(kept) == 20
    i, j = models.index(kept[0]), models.index(kept[1])
    assert battles["z"][0][1] == extra["battles"][i][j] and battles["z"][0][0] is None
    assert "top 20 of 30" in figures["predicted"]["layout"]["title"]["text"]
    assert len(figures["ratings"]["data"][0]["y"]) == 30  # the ratings chart keeps every model


def _luminance(colour: str) -> float:
    """Relative luminance (WCAG 2) of a #rrggbb colour: 0 black, 1 white."""
    channels = [int(colour[k : k + 2], 16) / 255 for k in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_more_battles_are_drawn_darker_from_zero():
    """The README demo's issue: Plotly's named "Blues" is dark at its minimum, so the pairs with the fewest
    battles were the darkest. The scale is spelled out, light at 0 battles to dark at the most."""
    models = ["a", "b", "c"]
    rows = [{"model": m, "rating": 1000 - k, "ci_low": None, "ci_high": None} for k, m in enumerate(models)]
    extra = {"models": models, "predicted": [[0.5] * 3] * 3, "battles": [[0, 5, 50], [5, 0, 500], [50, 500, 0]]}
    html = str(snapshot_figures(rows, extra, "Bradley-Terry"))
    trace = json.loads(html[html.index(">") + 1 : html.rindex("<")])["battles"]["data"][0]
    scale = trace["colorscale"]
    assert isinstance(scale, list) and not trace.get("reversescale")  # no library's name decides the direction
    assert [stop for stop, _ in scale] == sorted(stop for stop, _ in scale) and scale[0][0] == 0 and scale[-1][0] == 1
    luminances = [_luminance(colour) for _, colour in scale]
    assert all(a > b for a, b in zip(luminances, luminances[1:]))  # every step darker
    assert luminances[0] > 0.9 and luminances[-1] < 0.1
    assert trace["zmin"] == 0 and "zmax" not in trace  # 0 battles is the lightest; the most, the darkest
