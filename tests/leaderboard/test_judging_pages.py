"""The judges on the site, end to end with the real SmolLM2 as judge and answerer: a finished submission
is judged by the active judge, the board shows its judge column, the judge page its protocol, audit and
rank correlation with the arena, the judgment browser both answers and both verdicts; the downloads
and the API agree with the stored rows; hidden models stay hidden; bad parameters are 400s."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

import leaderboard.tasks  # noqa: F401 - registers the tasks, so eager sends run them in place
from leaderboard.judging.services import (
    judge_audit_request,
    judge_run_request,
    judge_runs_request_for_submission,
)
from leaderboard.models import JudgeAudit, JudgeRun, Judgment, Submission
from tests.leaderboard import board_data as bd
from tests.leaderboard.judging_data import INSTRUCTIONS, judge_setup

pytestmark = pytest.mark.django_db


def body(response) -> str:
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def eager(celery_eager):
    """Tasks run in place (tests/conftest.py)."""


@pytest.fixture
def judged(smollm2_dir, eager, django_capture_on_commit_callbacks):
    """Three models judged against a baseline (one of them a finished submission) and an audit on 4 pairs."""
    setup = judge_setup(smollm2_dir)
    owner = bd.user("owner@example.org")
    sub = bd.entry(owner, "acme/smol-sub", gsm8k=bd.pattern(20, 12))
    Submission.objects.filter(pk=sub.pk).update(storage_path=str(smollm2_dir), precision="float32")
    bd.arena_snapshot({"acme/smol-sub": (1050.0, 1000.0, 1100.0), "smol-terse": (1000.0, 950.0, 1050.0),
                       "smol-wordy": (980.0, 930.0, 1030.0)})  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        (run,) = judge_runs_request_for_submission(sub.pk)  # what the evaluation task calls when a suite finishes
        judge_run_request(setup["config"], setup["terse"])
        judge_run_request(setup["config"], setup["wordy"])
        judge_audit_request(setup["config"], limit=4)
    run.refresh_from_db()
    assert run.status == "FINISHED", run.failure_reason
    assert JudgeRun.objects.filter(status="FINISHED").count() == 3
    run.refresh_from_db()
    return {**setup, "sub": sub, "run": run, "owner": owner}


def test_board_judge_page_browser_exports_and_api(client, judged):
    config, sub, run = judged["config"], judged["sub"], judged["run"]
    r = run.results
    assert r["lc_ci_low"] <= r["lc_win_rate"] <= r["lc_ci_high"]

    board = client.get("/leaderboard/").content.decode()
    row = board[board.index(f'data-submission="{sub.public_id}"'):]
    row = row[: row.index("</tr>")]
    judge_cell = re.search(r'<td class="num judge">(.*?)</td>', row, re.S).group(1)
    assert f"/leaderboard/judges/{config.pk}/models/{sub.language_model_id}/" in judge_cell
    assert f"{r['lc_win_rate']:.1f}" in judge_cell and f"{r['lc_ci_low']:.1f}" in judge_cell
    assert "1050" in row  # the arena rating on the same row: one model, one row

    page = client.get(f"/leaderboard/judges/{config.pk}/").content.decode()
    assert run.judge_key in page and config.protocol_sha256 in page and "{answer_a}" in page
    style = r["bradley_terry_style"]  # Arena-Hard's style control, shown beside the plain rating
    assert style["ci_low"] <= style["rating"] <= style["ci_high"] and style != r["bradley_terry"]
    mine = page[page.index('<tr data-model="acme/smol-sub">'):]
    style_cell = re.search(r'<td class="num bt-style">(.*?)</td>', mine[: mine.index("</tr>")], re.S).group(1)
    assert f"{style['rating']:.0f}" in style_cell and f"{style['ci_low']:.0f}" in style_cell
    win_cell = re.search(r'<td class="num win-rate">(.*?)</td>', mine[: mine.index("</tr>")], re.S).group(1)
    assert f"{r['win_rate']:.1f}" in win_cell and f"{r['win_rate_ci_low']:.1f}–{r['win_rate_ci_high']:.1f}" in win_cell
    assert "±" not in win_cell and r["lc_interval"] == "delta-mid-p" and 0 <= r["lc_ci_low"] and r["lc_ci_high"] <= 100
    audit = JudgeAudit.objects.get()
    assert audit.status == "FINISHED", audit.failure_reason
    acc = audit.report["accuracy_swap_average"]
    assert audit.report["pairs"] == 4 and f"{acc['ci_low']:.3f}" in page
    chance = acc["ci_low"] <= 0.5 <= acc["ci_high"]
    assert chance  # 4 pairs cannot establish anything: the page must say so
    assert ("no better than chance" in page) == chance
    assert re.search(r"Spearman.*over 3 models", page, re.S)

    browser = client.get(f"/leaderboard/judges/{config.pk}/models/{sub.language_model_id}/").content.decode()
    assert browser.count('class="judgment"') == len(INSTRUCTIONS)
    for j in Judgment.objects.filter(run=run):
        assert f"{j.p_first:.3f}" in browser
    assert "Generate two rhymes" in browser

    rows = list(csv.DictReader(io.StringIO(body(client.get(f"/leaderboard/judges/{config.pk}/judgments.csv")))))
    assert len(rows) == 3 * 2 * len(INSTRUCTIONS)
    mine = [x for x in rows if x["model"] == "acme/smol-sub"]
    stored = {(j.idx, j.order): j.p_first for j in Judgment.objects.filter(run=run)}
    assert {(int(x["instruction_idx"]), x["order"]): float(x["p_first"]) for x in mine} == stored  # exact
    lines = body(client.get(f"/leaderboard/judges/{config.pk}/judgments.jsonl?model={sub.language_model_id}"))
    assert [json.loads(line)["order"] for line in lines.splitlines()] == ["ab", "ba"] * len(INSTRUCTIONS)

    scores = json.loads(body(client.get("/leaderboard/scores.json")))
    (entry,) = [x for x in scores["rows"] if x["submission_id"] == sub.public_id]
    assert entry["judge_score"] == r["lc_win_rate"] and entry["judge_length_controlled"] is True
    assert entry["arena_rating"] == 1050.0
    assert (entry["judge_bt_rating"], entry["judge_bt_style_rating"]) == (r["bradley_terry"]["rating"], style["rating"])
    assert entry["judge_bt_style_ci_low"] == style["ci_low"] and entry["judge_bt_style_ci_high"] == style["ci_high"]
    header = body(client.get("/leaderboard/scores.csv")).splitlines()[0].split(",")
    assert {"judge_bt_rating", "judge_bt_style_rating", "judge_bt_style_ci_high"} <= set(header)

    api = client.get(f"/api/judges/{config.pk}/").json()
    assert {s["model"] for s in api["scores"]} == {"acme/smol-sub", "smol-terse", "smol-wordy", "smol-baseline"}
    assert [s["value"] for s in api["scores"] if s["baseline"]] == [50.0]
    (mine_api,) = [s for s in api["scores"] if s["model"] == "acme/smol-sub"]
    assert mine_api["bradley_terry_style"] == style and mine_api["bradley_terry"] == r["bradley_terry"]
    assert api["correlation"]["n"] == 3 and api["audit"]["chance"] is True
    listed = client.get(f"/api/judges/{config.pk}/judgments/?model={sub.language_model_id}").json()
    assert listed["count"] == 2 * len(INSTRUCTIONS)
    schema = client.get("/api/schema/?format=json").json()
    assert {"/api/judges/", "/api/judges/{id}/", "/api/judges/{id}/judgments/"} <= set(schema["paths"])

    # The submission goes private: its judgments disappear for everyone but its owner.
    Submission.objects.filter(pk=sub.pk).update(private=True)
    assert "acme/smol-sub" not in client.get(f"/leaderboard/judges/{config.pk}/").content.decode()
    assert client.get(f"/leaderboard/judges/{config.pk}/models/{sub.language_model_id}/").status_code == 404
    assert "acme/smol-sub" not in body(client.get(f"/leaderboard/judges/{config.pk}/judgments.csv"))
    assert client.get(f"/api/judges/{config.pk}/judgments/?model={sub.language_model_id}").json()["count"] == 0
    client.force_login(judged["owner"])
    assert client.get(f"/leaderboard/judges/{config.pk}/models/{sub.language_model_id}/").status_code == 200
    assert client.get(f"/leaderboard/judges/{config.pk}/models/{sub.language_model_id}/?page=99").status_code == 400


HOSTILE_PAGES = [
    "/leaderboard/judges/?x=1",
    "/leaderboard/judges/{c}/?page=1",
    "/leaderboard/judges/{c}/judgments.csv?model=abc",
    "/leaderboard/judges/{c}/judgments.csv?model=-1",
    "/leaderboard/judges/{c}/judgments.csv?model=99999999999999999999",
    "/leaderboard/judges/{c}/judgments.jsonl?model=1&model=2",
    "/leaderboard/judges/{c}/judgments.jsonl?order=ab",
    "/api/judges/?q=1",
    "/api/judges/{c}/?model=1",
    "/api/judges/{c}/judgments/?model=abc",
    "/api/judges/{c}/judgments/?model=%00",
    "/api/judges/{c}/judgments/?limit=100000",
]


@pytest.mark.parametrize("url", HOSTILE_PAGES)
def test_bad_parameters_are_400_with_a_message(client, smollm2_dir, url):
    config = judge_setup(smollm2_dir)["config"]
    response = client.get(url.format(c=config.pk))
    assert response.status_code == 400
    assert response.content and b"Traceback" not in response.content


@pytest.mark.parametrize("url", ["/leaderboard/judges/999999/", "/leaderboard/judges/{c}/models/999999/",
                                 "/leaderboard/judges/999999/judgments.csv", "/api/judges/999999/",
                                 "/api/judges/999999/judgments/"])  # fmt: skip
def test_unknown_judges_and_unjudged_models_are_404(client, smollm2_dir, url):
    config = judge_setup(smollm2_dir)["config"]
    assert client.get(url.format(c=config.pk)).status_code == 404


def test_judgment_page_parameters_are_validated(client, smollm2_dir):
    setup = judge_setup(smollm2_dir)
    run = JudgeRun.objects.create(config=setup["config"], model=setup["terse"], status="FINISHED",
                                  instructions_sha256=setup["config"].instructions_sha256)  # fmt: skip
    base = f"/leaderboard/judges/{setup['config'].pk}/models/{setup['terse'].pk}/"
    assert client.get(base).status_code == 200
    for query in ("?page=0", "?page=abc", "?page=1&page=2", "?foo=1", "?page=2"):
        response = client.get(base + query)
        assert response.status_code == 400 and b'role="alert"' in response.content, query
    assert run.judgments.count() == 0
