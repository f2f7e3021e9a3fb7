"""Judge runs with the real SmolLM2 as judge and answerer, on the real database: answers, judgments in
both orders, scores with intervals; a retry or a re-run computes nothing again and duplicates nothing."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from evalcore.judging import pair_outcomes
from evalcore.judging.records import Judgment as CoreJudgment
from leaderboard.judging.columns import judge_cell
from leaderboard.judging.configs import answerer_of, judge_spec
from leaderboard.judging.exports import JUDGMENT_FIELDS, judgments_csv_chunks, judgments_jsonl_chunks
from leaderboard.judging.services import judge_config_save, judge_run_request
from leaderboard.judging.states import JudgeRunBusy, answers_claim, judge_run_start
from leaderboard.models import JudgeAnswer, JudgeConfig, JudgeRun, Judgment, JudgmentCacheEntry
from leaderboard.tasks import judge_run
from tests.leaderboard import board_data as bd
from tests.leaderboard.judging_data import INSTRUCTIONS, judge_setup

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager(celery_eager):
    """Tasks run in place (tests/conftest.py)."""


@pytest.fixture
def setup(smollm2_dir):
    return judge_setup(smollm2_dir)


def core_judgments(run):
    return [CoreJudgment(pair_id=j.idx, order=j.order, prompt_sha256=j.prompt_sha256, status="ok", p_first=j.p_first)
            for j in run.judgments.all()]  # fmt: skip


def test_two_models_judged_in_both_orders_with_scores_and_a_free_rerun(setup, eager, django_capture_on_commit_callbacks):
    config, terse, wordy = setup["config"], setup["terse"], setup["wordy"]
    with django_capture_on_commit_callbacks(execute=True):
        first = judge_run_request(config, terse)
    first.refresh_from_db()
    assert first.status == "FINISHED", first.failure_reason
    assert first.judgments.count() == 2 * len(INSTRUCTIONS)
    assert set(first.judgments.values_list("order", flat=True)) == {"ab", "ba"}
    assert JudgeAnswer.objects.filter(model=setup["baseline"]).count() == len(INSTRUCTIONS)
    # Only one model besides the baseline: a win rate, no LC (its GLM needs two), said in the notes.
    assert first.results["win_rate"] is not None and first.results["lc_win_rate"] is None
    outcomes, failed = pair_outcomes(core_judgments(first))
    assert not failed
    expected = 100 * sum(1 - o.swap_average for o in outcomes) / len(outcomes)  # answer_1 is the baseline's
    assert first.results["win_rate"] == pytest.approx(expected, abs=1e-9)
    r = first.results  # the win rate's own mid-p interval, over the n pairs it rests on; the board's cell shows it
    assert r["win_rate_ci_low"] <= r["win_rate"] <= r["win_rate_ci_high"] and r["n"] == len(INSTRUCTIONS)
    assert r["win_rate_interval"] in ("mid-p", "mid-p-effective") and 0 <= r["win_rate_ci_low"] < r["win_rate_ci_high"] <= 100
    cell = judge_cell(first)
    assert (cell["ci_low"], cell["ci_high"], cell["interval"]) == (r["win_rate_ci_low"], r["win_rate_ci_high"], r["win_rate_interval"])
    assert len(first.judge_key) > 20 and first.protocol_sha256 == config.protocol_sha256
    cost = first.results["cost"]  # the judge's time and prompt tokens per 1,000 judgments computed
    assert cost["judgments"] == 2 * len(INSTRUCTIONS) and cost["seconds_per_1000"] > 0 and cost["prompt_tokens_per_1000"] > 100_000

    with django_capture_on_commit_callbacks(execute=True):
        second = judge_run_request(config, wordy)
    second.refresh_from_db()
    first.refresh_from_db()
    assert second.status == "FINISHED", second.failure_reason
    for run in (first, second):  # LC is fitted across both models; both runs carry it with its interval
        r = run.results
        assert r["lc_win_rate"] is not None and r["lc_ci_low"] <= r["lc_win_rate"] <= r["lc_ci_high"]
        assert r["bradley_terry"]["ci_low"] <= r["bradley_terry"]["rating"] <= r["bradley_terry"]["ci_high"]
    assert second.results["judgments_computed"] == 2 * len(INSTRUCTIONS)  # terse's came from the cache

    # Judging again: nothing new is computed, every number is the same, no row is duplicated.
    cached, answers = JudgmentCacheEntry.objects.count(), JudgeAnswer.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        third = judge_run_request(config, wordy, again=True)
    third.refresh_from_db()
    assert third.results["judgments_computed"] == 0
    assert third.results["lc_win_rate"] == second.results["lc_win_rate"]
    assert JudgmentCacheEntry.objects.count() == cached and JudgeAnswer.objects.count() == answers
    assert judge_run_request(config, setup["baseline"]) is None  # the baseline is never judged against itself


def test_a_retry_of_a_finished_or_interrupted_run_duplicates_nothing(setup, eager, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_request(setup["config"], setup["terse"])
    assert judge_run.apply(args=[run.pk]).get() == "nothing to do"
    # A worker died mid-run: the run is RUNNING with a stale heartbeat and half its judgments stored.
    JudgeRun.objects.filter(pk=run.pk).update(status="RUNNING", heartbeat_at=None, worker="gone:1")
    Judgment.objects.filter(run=run, idx__gte=1).delete()
    assert judge_run.apply(args=[run.pk]).get() == "finished"
    run.refresh_from_db()
    assert run.status == "FINISHED" and run.attempts == 2 and run.judgments.count() == 2 * len(INSTRUCTIONS)
    assert run.results["judgments_computed"] == 0


def test_a_run_that_cannot_load_its_model_fails_with_the_reason(setup, eager, django_capture_on_commit_callbacks):
    setup["wordy"].model_args = {"path": "/nonexistent/model", "dtype": "float32"}
    setup["wordy"].save()
    with django_capture_on_commit_callbacks(execute=True):
        run = judge_run_request(setup["config"], setup["wordy"])
    run.refresh_from_db()
    assert run.status == "FAILED" and run.failure_reason


HOSTILE_CONFIGS = [
    ({"protocol_name": "../../etc/passwd"}, "protocol_name", "not bundled"),
    ({"protocol_name": "mt-bench-single"}, "baseline", "no baseline"),  # single-answer grading: no baseline
    ({"protocol_yaml": "name: x\nkind: pairwise\nuser: '{question}'\nverdict: {method: logprob}"}, "protocol_yaml", ""),
    ({"protocol_yaml": "[unclosed"}, "protocol_yaml", "not valid YAML"),
    ({"instructions": ["ok", ""]}, "instructions", "instruction 1"),
    ({"instructions": [1, 2]}, "instructions", "instruction 0"),
    ({"instructions": "just a string"}, "instructions", "list"),
    ({"judge_backend": "llama", "judge_model_args": {"path": "x"}}, "judge_model_args", "backend must be"),
    ({"judge_backend": "", "judge_model_args": {}}, "judge_model_args", "needs a catalogue model"),
    ({"max_new_tokens": 0}, "max_new_tokens", ""),
]


@pytest.mark.parametrize(("change", "field", "message"), HOSTILE_CONFIGS)
def test_hostile_judge_configs_are_refused_naming_the_field(setup, change, field, message):
    config = JudgeConfig.objects.get(pk=setup["config"].pk)
    config.name = "other"
    for key, value in change.items():
        setattr(config, key, value)
    with pytest.raises(ValidationError) as caught:
        judge_config_save(config)
    assert field in caught.value.message_dict
    assert message in " ".join(caught.value.message_dict[field])


def test_a_submission_that_finishes_its_suite_is_judged_by_every_active_judge(
    client, setup, eager, tiny_dir, submissions_dir, settings, django_capture_on_commit_callbacks
):
    settings.LEADERBOARD_SUITE_TASKS = [{"task": "mmlu_cloze_abstract_algebra", "num_fewshot": 0, "limit": 2}]
    inactive = JudgeConfig.objects.get(pk=setup["config"].pk)
    inactive.pk, inactive.name, inactive.active = None, "inactive-judge", False
    inactive.save()
    owner = get_user_model().objects.create_user("owner@example.org", "owner@example.org", "a-long-passphrase-42")
    client.force_login(owner)
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(tiny_dir.iterdir())]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/leaderboard/submit/", {"model_name": "acme/tiny", "files": files, "precision": "float32",
                                                        "model_type": "pretrained", "licence": "mit"})  # fmt: skip
    assert response.status_code == 302
    (run,) = JudgeRun.objects.all()  # the active judge only
    assert run.config_id == setup["config"].pk and run.model.name == "acme/tiny"
    assert run.status == "FINISHED", run.failure_reason
    assert run.judgments.count() == 2 * len(INSTRUCTIONS)


def test_what_a_worker_loads_for_the_judge_and_for_each_model(setup, smollm2_dir, settings, tmp_path):
    settings.PODIUM_MODELS_DIR = tmp_path
    config = setup["config"]
    assert judge_spec(config) == ("hf", (("dtype", "float32"), ("path", str(smollm2_dir))))
    config.judge_model = setup["wordy"]  # a catalogue entry as the judge: its backend and arguments
    setup["wordy"].model_args = {"path": "SmolLM2-135M-Instruct"}  # relative: under PODIUM_MODELS_DIR
    assert judge_spec(config) == ("hf", (("path", str(tmp_path / "SmolLM2-135M-Instruct")),))
    setup["wordy"].backend = "openai"  # an endpoint judge's tokenizer folder resolves the same way
    setup["wordy"].model_args = {"base_url": "http://127.0.0.1:8000/v1", "tokenizer": "SmolLM2-135M-Instruct"}
    assert dict(judge_spec(config)[1])["tokenizer"] == str(tmp_path / "SmolLM2-135M-Instruct")
    spec, generation = answerer_of(setup["wordy"])  # an arena model answers with its system prompt
    assert generation["source"] == "arena" and generation["system_prompt"].startswith("Always answer")
    sub = bd.entry(bd.user("o@example.org"), "acme/sub", gsm8k=bd.pattern(4, 2), precision="float32")
    spec, generation = answerer_of(sub.language_model)  # a finished submission: its checkpoint, greedy
    assert spec == ("hf", (("dtype", "float32"), ("path", sub.storage_path))) and generation["temperature"] == 0.0
    lonely = bd.submission(bd.user("p@example.org"), "acme/running", status="RUNNING").language_model
    with pytest.raises(ValueError, match="no finished submission and no backend"):
        answerer_of(lonely)


def test_the_board_sorts_by_the_judge_column(client, setup):
    assert client.get("/leaderboard/?sort=-judge").status_code == 200
    assert client.get("/leaderboard/?sort=judge").status_code == 200
    assert client.get("/leaderboard/?sort=judges").status_code == 400


def test_judgment_downloads_escape_formulas_and_keep_floats_exact():
    record = dict.fromkeys(JUDGMENT_FIELDS, "")
    record.update(run_id=1, model="m", instruction_idx=0, order="ab", p_first=0.1 + 0.2, weight=1.0,
                  raw='=HYPERLINK("http://evil.example")', error="@SUM(A1)", status="ok")  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(b"".join(judgments_csv_chunks([record])).decode())))
    assert rows[0]["raw"].startswith("'=") and rows[0]["error"].startswith("'@")
    assert float(rows[0]["p_first"]) == 0.1 + 0.2
    assert json.loads(b"".join(judgments_jsonl_chunks([record])))["raw"] == record["raw"]  # JSON is data, kept as is


def test_one_run_at_a_time_generates_a_models_answers(setup):
    sha = setup["config"].instructions_sha256
    other = JudgeRun.objects.create(config=setup["config"], model=setup["wordy"], status="RUNNING",
                                    heartbeat_at=timezone.now(), worker="elsewhere:1", instructions_sha256=sha,
                                    progress={"stage": "answers of smol-baseline"})  # fmt: skip
    mine = JudgeRun.objects.create(config=setup["config"], model=setup["terse"], status="RUNNING", instructions_sha256=sha)
    assert not answers_claim(mine.pk, "smol-baseline", sha, 3)  # the other run is generating them
    assert answers_claim(mine.pk, "smol-terse", sha, 3)
    assert JudgeRun.objects.get(pk=mine.pk).progress["stage"] == "answers of smol-terse"
    JudgeRun.objects.filter(pk=other.pk).update(progress={"stage": "answers of smol-wordy"})  # done with the baseline
    assert answers_claim(mine.pk, "smol-baseline", sha, 3)
    JudgeRun.objects.filter(pk=other.pk).update(progress={"stage": "answers of smol-terse"}, heartbeat_at=None)
    assert answers_claim(mine.pk, "smol-terse", sha, 3)  # a silent run's claim lapses


def test_a_judge_run_follows_the_submissions_takeover_rule(setup):
    """One rule for both (``lifecycle.worker_take``): a fresh heartbeat from a live worker means busy;
    a worker that exited on this machine, or a silent one, is taken over."""
    run = JudgeRun.objects.create(config=setup["config"], model=setup["terse"], status="RUNNING",
                                  heartbeat_at=timezone.now(), worker="elsewhere:1")  # fmt: skip
    with pytest.raises(JudgeRunBusy):
        judge_run_start(run.pk)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    JudgeRun.objects.filter(pk=run.pk).update(worker=f"{socket.gethostname()}:{dead.stdout.strip()}")
    started = judge_run_start(run.pk)
    assert started.worker == f"{socket.gethostname()}:{os.getpid()}" and started.attempts == 1
    JudgeRun.objects.filter(pk=run.pk).update(worker="elsewhere:1", heartbeat_at=timezone.now() - timedelta(days=1))
    assert judge_run_start(run.pk).attempts == 2  # silent for a day: taken over
    JudgeRun.objects.filter(pk=run.pk).update(status="FINISHED")
    assert judge_run_start(run.pk) is None
