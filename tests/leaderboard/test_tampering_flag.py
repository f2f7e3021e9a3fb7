"""A model whose HumanEval completions attack the verdict: re-scored from its stored outputs in the jail,
the forged pass is gone, the finding is stored with the document, and the submission is in the review
queue as "system"."""

from __future__ import annotations

import pytest

from evalcore.engine.runner import DEFAULT_FEWSHOT_SEED, build_records
from leaderboard.evaluation.rescoring import runs_rescore
from leaderboard.evaluation.task_index import task_config_current
from leaderboard.models import ReviewAction, SampleRecord, Score, Submission
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db

# Wrong answer, then an exit hook that makes the interpreter exit 0 after the failed assertion:
# the single-process jail once reported this "passed".
FORGED = "    return []\nimport atexit, os\natexit.register(lambda: os._exit(0))\n"


def test_a_forging_model_is_rescored_honestly_and_flagged(client):
    owner, admin = bd.user("owner@example.org"), bd.user("admin@example.org", staff=True)
    submission = bd.submission(owner, "acme/cheat")
    config = task_config_current("humaneval")
    records = build_records(config, num_fewshot=None, limit=2, seed=0, fewshot_seed=DEFAULT_FEWSHOT_SEED)
    completions = [records[0]["doc"]["canonical_solution"], FORGED]
    for record, completion in zip(records, completions):
        record.update(responses=[completion], filtered={"none": [completion]}, metrics={"pass@1": 1.0})
    bd.add_run(submission, "humaneval", records, metrics=["pass@1"], protocol={"config_sha256": "0" * 64})
    assert Score.objects.get(run__submission=submission, metric="pass@1").value == 1.0  # what the forgery claimed

    runs_rescore(task="humaneval", admin=admin, comment="verdicts from the referee (issue 28)")

    assert Score.objects.get(run__submission=submission, metric="pass@1").value == 0.5
    honest, forged = SampleRecord.objects.filter(run__submission=submission).order_by("doc_id")
    assert honest.payload["metrics"]["pass@1"] == 1.0 and not honest.payload.get("tampering")
    assert forged.payload["metrics"]["pass@1"] == 0.0
    assert "host reports: exit handler registered (atexit)" in forged.payload["tampering"]
    submission.refresh_from_db()
    assert submission.review_state == "flagged"
    assert submission.review_reason.startswith("code execution: 1 of 2 humaneval documents have programs that tamper")
    flag = ReviewAction.objects.get(submission=submission, admin__isnull=True)
    assert "document 1: imports atexit" in flag.comment
    protocol = submission.runs.get(task="humaneval").protocol
    assert protocol["tampering"]["docs"] == 1 and protocol["tampering"]["examples"][0]["doc_id"] == 1
    client.force_login(admin)
    assert "acme/cheat" in client.get("/leaderboard/review/").content.decode()
    runs_rescore(task="humaneval", admin=admin, comment="again")  # the same finding is not logged twice
    assert ReviewAction.objects.filter(submission=submission, admin__isnull=True).count() == 1
    assert Submission.objects.get(pk=submission.pk).review_state == "flagged"
