"""Re-scoring stored runs from their per-sample records: a changed filter changes the score, the old
value stays in history, no model is loaded, and running it again changes nothing."""

from __future__ import annotations

import copy
import sys

import pytest
import yaml
from django.core.exceptions import ValidationError

import evalcore.models
from evalcore.engine import rescore
from leaderboard.evaluation import rescoring
from leaderboard.models import EvaluationRun, SampleRecord, Score, ScoreHistory
from leaderboard.tasks import run_rescore
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db
STRICT = "exact_match,strict-match"


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    """Loading a model would fail: the checkpoints' folders do not exist and the loader raises."""

    def refuse(*args, **kwargs):
        raise AssertionError("re-scoring loaded a model")

    monkeypatch.setattr(evalcore.models, "load_backend", refuse)


@pytest.fixture
def admin():
    return bd.user("admin@example.org", staff=True)


@pytest.fixture
def runs():
    owner = bd.user("owner@example.org")
    # Wrong answers are "-1"; a strict filter that drops the sign reads "1", right for document 1 only.
    a = bd.entry(owner, "acme/a", gsm8k=[i % 3 != 1 for i in range(21)])
    b = bd.entry(owner, "acme/b", gsm8k=[False] * 10)
    return [EvaluationRun.objects.get(submission=s, task="gsm8k") for s in (a, b)]


def unsigned_strict_config():
    """gsm8k whose strict-match regex forgets the minus sign (the "fix" under test, reversed)."""
    config = rescoring.task_config_current("gsm8k")
    filters = copy.deepcopy(config.get("filter_list"))
    filters[0]["filter"][0]["regex_pattern"] = "#### -?([0-9\\.\\,]+)"
    return config.with_overrides(filter_list=filters)


def stored_records(run):
    return [
        rescoring.record_from_payload(s.payload)
        for s in SampleRecord.objects.filter(run=run).order_by("doc_id")
    ]


def test_a_changed_filter_changes_the_score_and_keeps_the_old_one(runs, admin):
    before = {r.pk: Score.objects.get(run=r, metric=STRICT).value for r in runs}
    flexible = {r.pk: Score.objects.get(run=r, metric="exact_match,flexible-extract").value for r in runs}
    config = unsigned_strict_config()
    expected = {r.pk: rescore(stored_records(r), config)[STRICT] for r in runs}
    had_transformers = "transformers" in sys.modules

    summary = rescoring.runs_rescore(task="gsm8k", admin=admin, comment="strict regex", task_config=config)

    assert summary.runs == 2 and summary.runs_changed == 2 and summary.config_sha256 == config.sha256
    assert ("transformers" in sys.modules) == had_transformers  # no backend was imported for this
    for run in runs:
        run.refresh_from_db()
        new = Score.objects.get(run=run, metric=STRICT)
        assert new.value == pytest.approx(expected[run.pk].value) and new.ci_high == pytest.approx(
            expected[run.pk].ci_high
        )
        assert new.value != before[run.pk]
        assert Score.objects.get(run=run, metric="exact_match,flexible-extract").value == flexible[run.pk]
        history = ScoreHistory.objects.get(run=run)
        assert history.metric == STRICT and history.value == before[run.pk]
        assert history.reason == "re-scored by admin@example.org: strict regex"
        assert history.code_version["git_commit"] == "abc123"  # what produced the old value
        assert run.config_sha256 == config.sha256 == run.protocol["config_sha256"]
        assert (
            run.protocol["config"]["filter_list"][0]["filter"][0]["regex_pattern"] == "#### -?([0-9\\.\\,]+)"
        )
        assert (
            run.protocol["rescores"][-1]["previous_config_sha256"] == bd.hashlib.sha256(b"gsm8k").hexdigest()
        )
        assert run.code_version["evalcore"] and run.results[STRICT]["value"] == pytest.approx(new.value)
    # Document 1 of the all-wrong run answered "-1": now read as "1", right; its record says so.
    doc1 = SampleRecord.objects.get(run=runs[1], doc_id=1).payload
    assert doc1["filtered"]["strict-match"] == ["1"] and doc1["metrics"][STRICT] == 1.0
    assert Score.objects.get(run=runs[1], metric=STRICT).value == pytest.approx(0.1)

    # Idempotent: the same config again changes nothing and adds no history.
    again = rescoring.runs_rescore(task="gsm8k", admin=admin, comment="strict regex", task_config=config)
    assert again.runs == 2 and again.runs_changed == 0 and again.scores_changed == 0
    assert ScoreHistory.objects.count() == 2
    assert all(len(EvaluationRun.objects.get(pk=r.pk).protocol["rescores"]) == 1 for r in runs)


def test_the_current_config_restores_the_score_through_the_celery_task(runs, admin):
    original = Score.objects.get(run=runs[0], metric=STRICT).value
    rescoring.runs_rescore(
        task="gsm8k", admin=admin, comment="break it", task_config=unsigned_strict_config()
    )
    assert Score.objects.get(run=runs[0], metric=STRICT).value != original
    assert run_rescore.apply(args=("gsm8k", admin.pk, "regex fixed")).get() == "2 runs, 2 scores changed"
    assert Score.objects.get(run=runs[0], metric=STRICT).value == pytest.approx(original)
    reasons = list(ScoreHistory.objects.filter(run=runs[0]).order_by("pk").values_list("reason", flat=True))
    assert reasons == [
        "re-scored by admin@example.org: break it",
        "re-scored by admin@example.org: regex fixed",
    ]


def test_stored_infinities_are_read_back_as_floats(admin):
    owner = bd.user("mc@example.org")
    sub = bd.submission(owner, "acme/mc")
    records = [bd.mmlu_record(i, i % 2 == 0) for i in range(6)]
    records[1]["choice_logprobs"][3 if records[1]["target"] != 3 else 2] = "-inf"  # as jsonb keeps -inf
    run = bd.add_run(sub, "mmlu_anatomy", records, metrics=["acc"])
    summary = rescoring.runs_rescore(task="mmlu_anatomy", admin=admin, comment="new config hash")
    assert summary.scores_changed == 0 and summary.runs == 1
    run.refresh_from_db()
    assert Score.objects.get(run=run, metric="acc").value == pytest.approx(0.5)
    assert run.config_sha256 == rescoring.task_config_current("mmlu_anatomy").sha256
    assert not ScoreHistory.objects.exists()
    assert (
        rescoring.record_from_payload(SampleRecord.objects.get(run=run, doc_id=1).payload)[
            "choice_logprobs"
        ].count(float("-inf"))
        == 1
    )


def test_refusals(runs, admin):
    owner = bd.user("plain@example.org")
    with pytest.raises(ValidationError, match="Only staff"):
        rescoring.runs_rescore(task="gsm8k", admin=owner, comment="x")
    with pytest.raises(ValidationError, match="comment is required"):
        rescoring.runs_rescore(task="gsm8k", admin=admin, comment="  ")
    with pytest.raises(ValidationError, match="not 'gsm8k'"):
        rescoring.runs_rescore(
            task="gsm8k", admin=admin, comment="x", task_config=rescoring.task_config_current("mmlu_anatomy")
        )
    with pytest.raises(ValidationError, match="not a task the engine knows"):
        rescoring.runs_rescore(task="no_such_task", admin=admin, comment="x")
    assert not ScoreHistory.objects.exists()


def test_staff_page_and_admin_action_enqueue_on_commit(
    runs, admin, client, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(run_rescore, "apply_async", lambda args, kwargs=None, **options: sent.append(tuple(args)))
    admin.is_superuser = True  # Django admin's change permissions
    admin.save()
    client.force_login(admin)
    response = client.post(
        "/admin/leaderboard/evaluationrun/", {"action": "rescore", "_selected_action": [runs[0].pk]}
    )
    assert response.status_code == 302 and response["Location"] == "/leaderboard/review/rescore/?task=gsm8k"
    page = client.get(response["Location"])
    assert page.status_code == 200 and 'value="gsm8k" selected' in page.content.decode()
    response = client.post("/leaderboard/review/rescore/", {"task": "gsm8k", "comment": ""})
    assert response.status_code == 400 and "A comment is required" in response.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/leaderboard/review/rescore/", {"task": "gsm8k", "comment": "regex fixed"})
    assert response.status_code == 302 and sent == [("gsm8k", admin.pk, "regex fixed")]
    run_rescore(*sent[0])  # what the worker runs
    assert EvaluationRun.objects.get(pk=runs[0].pk).protocol["rescores"][0]["comment"] == "regex fixed"
    client.force_login(bd.user("nobody@example.org"))
    assert client.get("/leaderboard/review/rescore/").status_code == 404


CODED_TASK = """\
task: coded_mc
dataset_path: json
output_type: multiple_choice
doc_to_text: "{{question}}"
doc_to_choice: [A, B, C, D]
doc_to_target: 0
process_results: !function utils.score
metric_list: [{metric: acc, aggregation: mean, higher_is_better: true}]
"""
# The task's own scoring (as a harness utils.py): the gold letter is the document number modulo 4.
CODED_UTILS = """\
def score(doc, results):
    lls = [ll for ll, _ in results]
    return {"acc": float(lls.index(max(lls)) == int(doc["question"][1:]) % 4)}
"""


@pytest.fixture
def coded_folder(tmp_path):
    folder = tmp_path / "operator_tasks"
    folder.mkdir()
    (folder / "coded_mc.yaml").write_text(CODED_TASK)
    (folder / "utils.py").write_text(CODED_UTILS)
    return folder


def coded_run(name: str):
    """A run whose stored metrics are wrong (all 0): the task's code, run again, finds 4 of 8 right."""
    records = [bd.mmlu_record(i, i % 2 == 0) for i in range(8)]
    for record in records:
        record["metrics"] = {"acc": 0.0}
    return bd.add_run(bd.submission(bd.user(f"{name}@example.org"), f"acme/{name}"), "coded_mc", records,
                      metrics=["acc"])  # fmt: skip


def test_tasks_with_python_from_a_trusted_folder_are_rescored(admin, settings, coded_folder):
    settings.LEADERBOARD_TRUSTED_TASK_PATHS = [str(coded_folder)]
    run = coded_run("coded")
    summary = rescoring.runs_rescore(task="coded_mc", admin=admin, comment="task code fixed")
    assert summary.runs == 1 and summary.scores_changed == 1
    assert Score.objects.get(run=run, metric="acc").value == pytest.approx(0.5)
    assert ScoreHistory.objects.get(run=run).value == 0.0
    run.refresh_from_db()
    assert "!function utils.score" in run.protocol["config"]["process_results"]  # with its source's hash
    assert SampleRecord.objects.get(run=run, doc_id=2).payload["metrics"]["acc"] == 1.0


def test_tasks_with_python_from_an_untrusted_folder_are_refused_saying_why(admin, settings, coded_folder):
    settings.LEADERBOARD_TASK_PATHS = [str(coded_folder)]
    run = coded_run("plain")
    with pytest.warns(UserWarning, match="skipped task file"):
        with pytest.raises(ValidationError, match="LEADERBOARD_TRUSTED_TASK_PATHS") as refused:
            rescoring.runs_rescore(task="coded_mc", admin=admin, comment="task code fixed")
    assert "coded_mc.yaml" in str(refused.value) and "process_results" in str(refused.value)
    with pytest.raises(ValidationError, match="LEADERBOARD_TRUSTED_TASK_PATHS"):
        rescoring.rescore_enqueue(task="coded_mc", admin=admin, comment="task code fixed")
    # A mapping cannot smuggle code in: the stored config's function is text, not a trusted tag.
    with pytest.raises(ValidationError, match="must be Python code"):
        rescoring.runs_rescore(task="coded_mc", admin=admin, comment="x",
                               task_config=yaml.safe_load(CODED_TASK.replace("!function ", "")))  # fmt: skip
    assert Score.objects.get(run=run, metric="acc").value == 0.0 and not ScoreHistory.objects.exists()
