"""The leaderboard page in pages (?page=): the pages together are the whole sorted, filtered table,
sorting and filters work across pages, hostile page numbers get a 400 or the last page, and the
downloads stay complete whatever the page."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from leaderboard.board import page as board_page_module
from leaderboard.board.selectors import board_table
from leaderboard.models import Submission
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db
ROWS = 4


def names_of(html: str) -> list[str]:
    public_ids = re.findall(r'<tr data-submission="([A-Za-z0-9_-]{22})"', html)
    names = dict(Submission.objects.filter(public_id__in=public_ids).values_list("public_id", "model_name"))
    return [names[p] for p in public_ids]


@pytest.fixture
def board(monkeypatch):
    """Ten models with distinct gsm8k scores (m00 worst ... m09 best), four rows a page."""
    monkeypatch.setattr(board_page_module, "PAGE_ROWS", ROWS)
    board_page_module._RENDERED.clear()
    board_page_module._TABLES.clear()
    owner = bd.user("owner@example.com")
    for k in range(10):
        bd.entry(owner, f"m{k:02d}", gsm8k=bd.pattern(20, 5 + k), model_type="chat" if k % 2 else "pretrained")
    return owner


def pages(client, query: str = "") -> list[list[str]]:
    found, number = [], 1
    while True:
        response = client.get(f"/leaderboard/?{query}&page={number}" if query else f"/leaderboard/?page={number}")
        assert response.status_code == 200
        found.append(names_of(response.content.decode()))
        if 'id="board-next"' not in response.content.decode():
            return found
        number += 1


def test_pages_partition_the_sorted_table(client, board):
    by_page = pages(client)
    assert [len(p) for p in by_page] == [4, 4, 2]
    assert sum(by_page, []) == [f"m{k:02d}" for k in range(9, -1, -1)]  # best average first
    html = client.get("/leaderboard/?page=2").content.decode()
    assert "Rows 5–8 of 10 (page 2 of 3)" in html and 'id="board-previous"' in html
    assert "10 models." in html
    # Ranks come from the whole table, not from the page.
    ranks = re.findall(r'<tr data-submission="[^"]+"[^>]*>\s*<td class="num">(\d+|–)', html)
    whole = board_table()["rows"][ROWS : 2 * ROWS]
    assert ranks == [str(r["rank"]) if r["rank"] else "–" for r in whole] and len(ranks) == ROWS


def test_sort_and_filters_apply_across_pages(client, board):
    assert sum(pages(client, "sort=model"), []) == [f"m{k:02d}" for k in range(10)]
    chat = sum(pages(client, "type=chat&sort=model"), [])
    assert chat == [f"m{k:02d}" for k in range(1, 10, 2)]
    html = client.get("/leaderboard/?type=chat&page=2").content.decode()
    next_link = re.search(r'id="board-previous" href="\?([^"]+)"', html).group(1)
    assert "type=chat" in next_link.replace("&amp;", "&")
    # A sort link starts again at page 1, keeping the filters.
    sort_link = re.search(r'<a href="\?([^"]*sort=model[^"]*)">Model</a>', html).group(1)
    assert "page=" not in sort_link and "type=chat" in sort_link.replace("&amp;", "&")


@pytest.mark.parametrize("page", ["0", "-1", "abc", "1.5", "", "2e3", "1000001", "9" * 5000])
def test_hostile_page_numbers_are_a_clear_400_or_ignored(client, board, page):
    response = client.get(f"/leaderboard/?page={page}")
    if page == "":
        assert response.status_code == 200 and len(names_of(response.content.decode())) == ROWS
        return
    assert response.status_code == 400
    assert "page" in response.content.decode().lower()


def test_a_page_past_the_end_shows_the_last_page(client, board):
    html = client.get("/leaderboard/?page=999999").content.decode()
    assert names_of(html) == ["m01", "m00"] and "page 3 of 3" in html
    repeated = client.get("/leaderboard/?page=2&page=3")
    assert repeated.status_code == 400


def test_downloads_hold_every_row_whatever_the_page(client, board):
    raw = b"".join(client.get("/leaderboard/scores.csv?page=2").streaming_content)
    rows = list(csv.DictReader(io.StringIO(raw.decode())))
    assert len(rows) == 10
    data = json.loads(b"".join(client.get("/leaderboard/scores.json?page=3").streaming_content))
    assert len(data["rows"] if isinstance(data, dict) else data) == 10
    html = client.get("/leaderboard/?page=2&type=chat").content.decode()
    assert re.search(r'scores\.csv\?type=chat"', html)  # the page's download link drops the page


def test_conservative_ranks_count_the_entries_wholly_above():
    """1 + the entries whose interval lies wholly above (ci_low strictly above this ci_high), ties at
    equal bounds included, for a table of many rows (sorted bounds and bisection, not a double loop)."""
    import random

    from leaderboard.board.selectors import _ranks

    rng = random.Random(4)
    rows = []
    for _ in range(400):
        value = round(rng.uniform(20, 80), 1)
        half = rng.choice([0.0, 0.5, 1.0, 2.5])
        rows.append({"avg": {"value": value, "ci_low": value - half, "ci_high": value + half}})
    rows.append({"avg": None})
    rows.append({"avg": {"value": 50.0, "ci_low": None, "ci_high": None}})
    _ranks(rows)
    ranked = [r for r in rows if r["avg"] and r["avg"]["ci_low"] is not None]
    for row in ranked:
        above = sum(1 for other in ranked if other["avg"]["ci_low"] > row["avg"]["ci_high"])
        assert row["rank"] == 1 + above
    assert "rank" not in rows[-1] and "rank" not in rows[-2]
