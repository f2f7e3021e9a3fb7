"""A submission's page: PENDING says where it stands in the evaluation queue (from the database),
RUNNING shows the progress its worker stored (tasks done of total, the stage, a progress bar) and
polls ``progress.json``, FINISHED shows the board's own average, interval, rank and a link to its row,
with the per-task tables folded into one closed group per benchmark."""

from __future__ import annotations

import html as html_module
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.board import page as board_page_module
from leaderboard.board.selectors import board_table
from leaderboard.models import Submission
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_board():
    board_page_module._RENDERED.clear()
    board_page_module._TABLES.clear()


def page_of(client, sub) -> str:
    response = client.get(f"/leaderboard/submissions/{sub.public_id}/")
    assert response.status_code == 200
    return html_module.unescape(response.content.decode())


def progress_of(client, sub) -> dict:
    response = client.get(f"/leaderboard/submissions/{sub.public_id}/progress.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    return response.json()


def pending(owner, name: str, *, dispatched_at=None, created_at=None) -> Submission:
    sub = bd.submission(owner, name, status="PENDING")
    fields = {"dispatched_at": dispatched_at}
    if created_at is not None:
        fields["created_at"] = created_at
    Submission.objects.filter(pk=sub.pk).update(**fields)
    sub.refresh_from_db()
    return sub


# -- PENDING: the queue ----------------------------------------------------------------------------


def test_pending_shows_its_place_in_the_queue_counted_from_the_database(client):
    owner, other = bd.user("owner@example.org"), bd.user("other@example.org")
    now = timezone.now()
    first = pending(other, "q/first", dispatched_at=now - timedelta(minutes=30))
    second = pending(other, "q/second", dispatched_at=now - timedelta(minutes=20))
    mine = pending(owner, "q/mine", dispatched_at=now - timedelta(minutes=10))
    later = pending(other, "q/later", dispatched_at=now - timedelta(minutes=5))
    unsent = pending(other, "q/unsent", created_at=now - timedelta(hours=2))  # the broker was down: not yet queued
    bd.submission(other, "q/running", status="RUNNING")
    bd.entry(other, "q/done", gsm8k=[True, False])  # finished: not in the queue
    failed = bd.submission(other, "q/failed", status="RUNNING")
    Submission.objects.filter(pk=failed.pk).update(status="FAILED", failure_reason="out of memory")  # not queued

    assert progress_of(client, first)["queue"] == {
        "position": 1, "ahead": 0, "running": 1,
        "sentence": "Next in the evaluation queue: no submission is waiting ahead of this one, "
                    "and 1 is being evaluated now.",
    }  # fmt: skip
    assert progress_of(client, second)["queue"]["ahead"] == 1
    queue = progress_of(client, mine)["queue"]
    assert queue["position"] == 3 and queue["ahead"] == 2
    assert queue["sentence"] == ("Position 3 in the evaluation queue: 2 submissions are waiting ahead of this one, "
                                 "and 1 is being evaluated now.")  # fmt: skip
    assert progress_of(client, later)["queue"]["ahead"] == 3
    # Not yet taken by the broker: everything it holds is ahead, whatever the creation times.
    assert progress_of(client, unsent)["queue"]["ahead"] == 4
    assert queue["sentence"] in page_of(client, mine)
    # Private queued variants of others count (a worker runs them too) but are never named.
    Submission.objects.filter(pk=first.pk).update(private=True)
    assert progress_of(client, mine)["queue"]["ahead"] == 2
    assert "q/first" not in page_of(client, mine)
    # The one ahead starts: one fewer waiting, one more running.
    Submission.objects.filter(pk=second.pk).update(status="RUNNING", started_at=timezone.now())
    assert progress_of(client, mine)["queue"] == {
        "position": 2, "ahead": 1, "running": 2,
        "sentence": "Position 2 in the evaluation queue: 1 submission is waiting ahead of this one, "
                    "and 2 are being evaluated now.",
    }  # fmt: skip


def test_a_tie_on_the_dispatch_time_is_broken_by_the_row_not_counted_twice(client):
    owner = bd.user("owner@example.org")
    at = timezone.now()
    a, b = pending(owner, "t/a", dispatched_at=at), pending(owner, "t/b", dispatched_at=at)
    ahead = sorted([progress_of(client, a)["queue"]["ahead"], progress_of(client, b)["queue"]["ahead"]])
    assert ahead == [0, 1]


def test_the_queue_is_gone_once_it_runs(client):
    sub = bd.submission(bd.user("owner@example.org"), "r/model", status="RUNNING")
    assert progress_of(client, sub)["queue"] is None


# -- RUNNING: progress ------------------------------------------------------------------------------


def runner_progress(done: int, total: int, current: str | None, requests=None) -> dict:
    """Progress shaped as leaderboard.evaluation.runner stores it."""
    tasks = {f"mmlu_s{k:02d}": ("finished" if k < done else "waiting") for k in range(total)}
    return {"suite": "podium v3", "tasks_total": total, "tasks_done": done, "current_task": current,
            "tasks": tasks, "requests": requests}  # fmt: skip


def test_running_shows_tasks_done_of_total_the_stage_and_a_bar(client):
    owner = bd.user("owner@example.org")
    sub = bd.submission(owner, "r/model", status="RUNNING")
    Submission.objects.filter(pk=sub.pk).update(
        progress=runner_progress(12, 58, "mmlu_s12", {"done": 40, "total": 400}))
    html = page_of(client, sub)
    assert "12 of 58 tasks done (podium v3)" in html
    assert re.search(r'<progress id="run-progress" max="58" value="12">', html)
    assert "Evaluating mmlu_s12." in html and "mmlu_s12: 40 of 400 requests answered" in html
    assert 'data-active="1"' in html and "js/submission.js" in html
    summary = progress_of(client, sub)["summary"]
    assert summary == {"suite": "podium v3", "tasks_total": 58, "tasks_done": 12, "current_task": "mmlu_s12",
                       "stage": "Evaluating mmlu_s12.", "requests": {"done": 40, "total": 400},
                       "percent": pytest.approx(100 * 12 / 58, abs=0.05)}  # fmt: skip
    # Every task done, the memorisation probe running: 58 of 58, and the stage says what is left.
    Submission.objects.filter(pk=sub.pk).update(progress=runner_progress(58, 58, "memorisation probe: gsm8k"))
    summary = progress_of(client, sub)["summary"]
    assert (summary["tasks_done"], summary["tasks_total"], summary["percent"]) == (58, 58, 100.0)
    assert summary["stage"] == "Memorisation probe on gsm8k (a contamination check)."
    Submission.objects.filter(pk=sub.pk).update(progress=runner_progress(58, 58, None))
    assert "storing the results" in progress_of(client, sub)["summary"]["stage"]
    Submission.objects.filter(pk=sub.pk).update(progress=runner_progress(3, 58, None))
    assert progress_of(client, sub)["summary"]["stage"] == "Loading the model."
    Submission.objects.filter(pk=sub.pk).update(progress={})  # a worker took it, nothing reported yet
    assert progress_of(client, sub)["summary"]["stage"].startswith("Starting")
    assert "Starting" in page_of(client, sub)


@pytest.mark.parametrize("progress", [
    [], "not a dict", {"tasks_total": "58", "tasks_done": "x"}, {"tasks_total": -3, "tasks_done": 5},
    {"tasks_total": 4, "tasks_done": 99, "requests": "lots"}, {"tasks_total": None, "current_task": 7},
    {"tasks_total": 2, "tasks_done": 1, "requests": {"done": 1}},
])  # fmt: skip
def test_malformed_stored_progress_is_shown_as_none_not_a_crash(client, progress):
    sub = bd.submission(bd.user("owner@example.org"), "r/odd", status="RUNNING")
    Submission.objects.filter(pk=sub.pk).update(progress=progress)
    summary = progress_of(client, sub)["summary"]
    assert 0 <= summary["tasks_done"] <= summary["tasks_total"] and 0 <= summary["percent"] <= 100
    assert summary["requests"] is None or 0 <= summary["requests"]["done"] <= summary["requests"]["total"]
    page_of(client, sub)


def test_progress_json_is_for_whoever_may_see_the_page_and_withholds_the_log(client):
    owner, other = bd.user("owner@example.org"), bd.user("other@example.org")
    sub = bd.submission(owner, "r/private", status="RUNNING", private=True)
    url = f"/leaderboard/submissions/{sub.public_id}/progress.json"
    assert client.get(url).status_code == 404  # anonymous: a private variant does not exist
    client.force_login(other)
    assert client.get(url).status_code == 404
    client.force_login(owner)
    assert client.get(url).status_code == 200
    assert client.post(url).status_code == 405 and client.put(url).status_code == 405
    Submission.objects.filter(pk=sub.pk).update(private=False, status="FAILED", failure_reason="out of memory",
                                                log_tail="Traceback: secret/path")  # fmt: skip
    assert client.get(url).json()["log_tail"] == "Traceback: secret/path"  # the owner's own
    client.force_login(other)
    state = client.get(url).json()
    assert state["status"] == "FAILED" and state["active"] is False and "log_tail" not in state
    for bad in ("0", "x" * 23, "..%2F..%2Fetc", "%00" * 22, "a" * 22):
        assert client.get(f"/leaderboard/submissions/{bad}/progress.json").status_code == 404


# -- FINISHED: the board's numbers -----------------------------------------------------------------


@pytest.fixture
def board(monkeypatch):
    """Five models with distinct gsm8k scores and the same two MMLU subjects, two rows a board page."""
    monkeypatch.setattr(board_page_module, "PAGE_ROWS", 2)
    owner = bd.user("owner@example.org")
    subs = {}
    for k in range(5):
        subs[k] = bd.entry(owner, f"m{k}", gsm8k=bd.pattern(20, 4 + 3 * k),
                           mmlu={"anatomy": bd.pattern(12, 3 + k), "virology": bd.pattern(9, 2 + k, offset=1)})
    return subs


def test_finished_shows_the_boards_average_rank_and_a_link_to_its_row(client, board):
    table = board_table()
    rows = {r["public_id"]: r for r in table["rows"]}
    sub = board[1]  # fourth best of five: on the board's second page
    row = rows[sub.public_id]
    html = page_of(client, sub)
    shown = re.search(r'Board average <strong class="board-average">([\d.]+)</strong>\s*'
                      r'<span class="board-interval">\(95% interval ([\d.]+)–([\d.]+)\)', html)  # fmt: skip
    assert shown, html
    assert [float(x) for x in shown.groups()] == [
        pytest.approx(round(row["avg"][k], 1), abs=1e-4) for k in ("value", "ci_low", "ci_high")
    ]
    rank = re.search(r'Rank <strong class="board-rank">(\d+)</strong>', html)
    assert rank and int(rank.group(1)) == row["rank"] and "of 5 on the board" in html
    assert "4th by average" in html
    link = re.search(r'<a id="board-row-link" href="([^"]+)"', html).group(1)
    assert link == f"/leaderboard/?page=2#entry-{sub.public_id}" and "(page 2)" in html
    board_html = client.get(link.split("#")[0]).content.decode()
    assert f'id="entry-{sub.public_id}"' in board_html  # the anchor is on the page the link opens
    best = board[4]
    assert re.search(r'<a id="board-row-link" href="/leaderboard/#entry-' + best.public_id, page_of(client, best))
    assert "1st by average" in page_of(client, best)


def test_finished_results_fold_into_closed_groups_with_the_boards_cells(client, board):
    sub = board[2]
    row = {r["public_id"]: r for r in board_table()["rows"]}[sub.public_id]
    html = page_of(client, sub)
    groups = re.findall(r'<details class="benchmark-group"( open)? data-benchmark="([a-z0-9_]+)">', html)
    assert groups == [("", "mmlu"), ("", "gsm8k")]  # the board's column order, each closed
    for key in ("mmlu", "gsm8k"):
        cell = row["cells"][key]
        block = html.split(f'data-benchmark="{key}">', 1)[1].split("</summary>", 1)[0]
        score = re.search(r'<span class="group-score">([\d.]+) <span class="ci">\[([\d.]+), ([\d.]+)\]</span> '
                          r'<span class="muted">n=(\d+)</span>', block)  # fmt: skip
        assert score, block
        assert [float(x) for x in score.groups()[:3]] == [
            pytest.approx(round(cell[k], 1), abs=1e-4) for k in ("shown", "shown_low", "shown_high")
        ]
        assert int(score.group(4)) == cell["n"]
    mmlu = html.split('data-benchmark="mmlu">', 1)[1].split("</details>", 1)[0]
    assert "2 tasks" in mmlu and "mmlu_anatomy" in mmlu and "mmlu_virology" in mmlu and "gsm8k" not in mmlu


def test_hidden_and_private_entries_link_to_the_board_that_lists_them(client, board):
    owner = Submission.objects.get(pk=board[0].pk).owner
    Submission.objects.filter(pk=board[0].pk).update(review_state="hidden")
    html = page_of(client, board[0])
    link = re.search(r'<a id="board-row-link" href="([^"]+)"', html).group(1)
    assert link.startswith("/leaderboard/?show=hidden") and link.endswith(f"#entry-{board[0].public_id}")
    assert "(with hidden models)" in html
    assert f'id="entry-{board[0].public_id}"' in client.get(link.split("#")[0]).content.decode()
    Submission.objects.filter(pk=board[3].pk).update(private=True)
    assert client.get(f"/leaderboard/submissions/{board[3].public_id}/").status_code == 404
    client.force_login(owner)
    html = page_of(client, board[3])
    assert "only you see it there" in html and 'id="board-row-link"' in html
    other = bd.user("staff@example.org", staff=True)
    client.force_login(other)
    html = page_of(client, board[3])
    assert 'id="board-row-link"' not in html and "it is a private variant" in html


def test_finished_without_every_benchmark_has_no_average_but_its_row(client, board):
    lone = bd.entry(Submission.objects.get(pk=board[0].pk).owner, "lone", gsm8k=bd.pattern(20, 10))
    html = page_of(client, lone)
    assert "No board average" in html and 'id="board-row-link"' in html and 'class="board-rank"' not in html


def test_pending_and_running_pages_have_no_board_summary_and_finished_no_poll(client, board):
    html = page_of(client, board[0])
    assert 'data-active="0"' in html and "js/submission.js" not in html
    sub = bd.submission(Submission.objects.get(pk=board[0].pk).owner, "p/model", status="PENDING")
    html = page_of(client, sub)
    assert 'id="board-summary"' not in html and "No results" not in html and "js/submission.js" in html
