"""Issue 49 on the board: a submission with GSM8K at 0 of 4 and MMLU on 114 questions shows an honest
interval for the 0/4 task, for its normalised score and for the average; the downloads and the API carry the
same numbers and name the method; ``manage.py recompute_intervals`` gives stored runs today's intervals
from their samples. Expected numbers are computed here from scipy's binomial, not from evalcore."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from django.core.management import CommandError, call_command

from leaderboard.evaluation.task_index import task_config_current
from leaderboard.models import Score, ScoreHistory
from tests.leaderboard import board_data as bd
from tests.leaderboard.test_board import midp, mover, row_html

pytestmark = pytest.mark.django_db


def body(response) -> str:
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def small(db):
    owner = bd.user("small@example.org")
    sub = bd.submission(owner, "acme/tiny-run")
    gsm_sha = task_config_current("gsm8k").sha256
    mmlu_sha = task_config_current("mmlu_anatomy").sha256
    bd.add_run(sub, "gsm8k", [bd.gsm8k_record(i, False) for i in range(4)],
               metrics=["exact_match,strict-match", "exact_match,flexible-extract"], config_sha256=gsm_sha)  # fmt: skip
    bd.add_run(sub, "mmlu_anatomy", [bd.mmlu_record(i, ok) for i, ok in enumerate(bd.pattern(114, 34))],
               metrics=["acc"], config_sha256=mmlu_sha)  # fmt: skip
    return sub


def test_a_task_at_0_of_4_has_an_honest_interval_everywhere(client, small):
    gsm = Score.objects.get(run__submission=small, run__task="gsm8k", metric="exact_match,strict-match")
    assert gsm.value == 0.0 and gsm.interval == "mid-p" and gsm.stderr is None  # lopsided: no standard error
    assert (gsm.ci_low, gsm.ci_high) == pytest.approx((0.0, 1 - 0.05**0.25), abs=1e-4)  # (1-p)^4 / 2 = 0.025
    html = client.get("/leaderboard/").content.decode()
    row = row_html(html, small.pk)
    assert "0.0–52.7" in row and "n=4" in row and "no standard error" in row
    mmlu_low, mmlu_high = midp(34, 114)
    assert f"{100 * mmlu_low:.1f}–{100 * mmlu_high:.1f}" in row and "n=114" in row
    avg, avg_low, avg_high = mover([0.0, 34 / 114], [0.0, mmlu_low], [1 - 0.05**0.25, mmlu_high])
    assert avg_high - avg_low > 0.26  # at least the parts' widths imply; the plug-in average gave 0.09
    assert f"{100 * avg_low:.1f}–{100 * avg_high:.1f}" in row and "n=118" in row
    # Normalised: GSM8K's baseline is 0, so its interval is the same; MMLU's is mapped through 0.25 and cut at 0.
    norm_html = client.get("/leaderboard/?scale=normalised").content.decode()
    norm_row = row_html(norm_html, small.pk)
    assert "0.0–52.7" in norm_row
    mmlu_norm = (34 / 114 - 0.25) / 0.75 * 100
    norm_low, norm_high = max(0.0, (mmlu_low - 0.25) / 0.75 * 100), (mmlu_high - 0.25) / 0.75 * 100
    assert f"{mmlu_norm:.1f}" in norm_row and f"{norm_low:.1f}–{norm_high:.1f}" in norm_row and norm_low == 0.0
    k_mean = (0.0 + mmlu_norm) / 2
    down = math.sqrt(0.0 + (mmlu_norm - norm_low) ** 2) / 2
    up = math.sqrt((100 * (1 - 0.05**0.25)) ** 2 + (norm_high - mmlu_norm) ** 2) / 2
    assert f"{max(0.0, k_mean - down):.1f}–{k_mean + up:.1f}" in norm_row


def test_downloads_and_api_agree_with_the_page_and_name_the_method(client, small):
    rows = list(csv.DictReader(io.StringIO(body(client.get("/leaderboard/scores.csv")))))
    row = next(r for r in rows if r["model"] == "acme/tiny-run")
    assert row["gsm8k"] == "0.0" and row["gsm8k_stderr"] == "" and row["gsm8k_interval"] == "mid-p"
    assert float(row["gsm8k_ci_high"]) == pytest.approx(1 - 0.05**0.25) and row["gsm8k_n"] == "4"
    assert float(row["gsm8k_normalised_ci_high"]) == pytest.approx(100 * (1 - 0.05**0.25))
    assert row["mmlu_interval"] == "mid-p" and float(row["mmlu_ci_low"]) == pytest.approx(midp(34, 114)[0])
    assert float(row["mmlu_normalised_ci_low"]) == 0.0  # cut at 0 as the score would be
    assert row["average_interval"] == "mover" and row["average_n"] == "118"
    mmlu_low, mmlu_high = midp(34, 114)
    _, avg_low, avg_high = mover([0.0, 34 / 114], [0.0, mmlu_low], [1 - 0.05**0.25, mmlu_high])
    assert float(row["average_ci_low"]) == pytest.approx(avg_low) and float(row["average_ci_high"]) == pytest.approx(avg_high)
    table = json.loads(body(client.get("/leaderboard/scores.json")))
    assert "mid-p" in table["intervals"] and "MOVER" in table["average"]
    record = next(r for r in table["rows"] if r["model"] == "acme/tiny-run")
    assert record["scores"]["gsm8k"]["ci_high"] == pytest.approx(float(row["gsm8k_ci_high"]))
    assert record["average_ci_low"] == pytest.approx(avg_low) and record["average_interval"] == "mover"
    api = client.get("/api/scores/", {"submission": small.public_id}).json()
    found = {(s["task"], s["metric"]): s for s in api["results"]}
    strict = found[("gsm8k", "exact_match,strict-match")]
    assert strict["interval"] == "mid-p" and strict["stderr"] is None and strict["n"] == 4
    assert strict["ci_high"] == pytest.approx(1 - 0.05**0.25) and strict["effective_n"] == 4.0
    every = list(csv.DictReader(io.StringIO(body(client.get("/leaderboard/all-scores.csv")))))
    mine = next(r for r in every if r["task"] == "mmlu_anatomy" and r["model"] == "acme/tiny-run")
    assert mine["interval"] == "mid-p" and float(mine["ci_low"]) == pytest.approx(mmlu_low)


def test_recompute_intervals_from_stored_samples(small):
    # Rows as an older version stored them: Wilson's interval with the plug-in standard error (0 at 0 of 4).
    old = Score.objects.get(run__submission=small, run__task="gsm8k", metric="exact_match,strict-match")
    Score.objects.filter(pk=old.pk).update(stderr=0.0, ci_low=0.0, ci_high=0.49, interval="wilson", effective_n=None)
    Score.objects.filter(run__task="mmlu_anatomy").update(interval="normal", stderr=0.0429, effective_n=None)
    dry = io.StringIO()
    call_command("recompute_intervals", "--dry-run", stdout=dry)
    assert "2 scores would change in 2 runs" in dry.getvalue()
    assert Score.objects.get(pk=old.pk).interval == "wilson"  # a dry run writes nothing
    out = io.StringIO()
    call_command("recompute_intervals", stdout=out)
    assert "2 scores changed in 2 runs" in out.getvalue()
    new = Score.objects.get(pk=old.pk)
    assert new.interval == "mid-p" and new.stderr is None and new.ci_high == pytest.approx(1 - 0.05**0.25)
    assert new.value == 0.0  # the value is the stored one
    kept = ScoreHistory.objects.get(run=new.run, metric=new.metric)
    assert kept.ci_high == 0.49 and kept.interval == "wilson" and "recomputed" in kept.reason
    again = io.StringIO()
    call_command("recompute_intervals", stdout=again)
    assert "0 scores changed in 0 runs" in again.getvalue()
    assert len(new.run.protocol["intervals_recomputed"]) == 1  # the protocol says when and with which code


def test_recompute_leaves_a_run_whose_value_would_change_and_refuses_unknown_tasks(small):
    score = Score.objects.get(run__submission=small, run__task="mmlu_anatomy")
    Score.objects.filter(pk=score.pk).update(value=0.5)  # scored another way since: re-score, not recompute
    out = io.StringIO()
    call_command("recompute_intervals", "--task", "mmlu_anatomy", stdout=out)
    assert "kept as it was" in out.getvalue() and "re-score it" in out.getvalue()
    assert Score.objects.get(pk=score.pk).value == 0.5
    with pytest.raises(CommandError, match="no run of task"):
        call_command("recompute_intervals", "--task", "no_such_task; DROP TABLE x")
