"""A cheating submission end to end (issue 47): its HumanEval completions read the tests and rebind the
builtins the tests compare through, behind answers that are right on two problems in three. Scored from
its stored outputs by Podium's pass@k, it gets exactly what the same answers without the tricks get;
the submission lands in the review queue once, as "system", with what was tried; the honest one does not.
"""

from __future__ import annotations

import pytest

from evalcore.engine.runner import DEFAULT_FEWSHOT_SEED, build_records
from leaderboard.evaluation.rescoring import runs_rescore
from leaderboard.evaluation.task_index import task_config_current
from leaderboard.models import ReviewAction, SampleRecord, Score, Submission
from tests.evalcore.jail.test_jail_cheats import cheating, honest
from tests.leaderboard import board_data as bd

pytestmark = pytest.mark.django_db

DOCS = 9


def stored(owner, name: str, answer) -> Submission:
    """A submission whose stored HumanEval run holds ``answer(problem)`` per document, claiming it all passed."""
    submission = bd.submission(owner, name)
    records = build_records(task_config_current("humaneval"), num_fewshot=None, limit=DOCS, seed=0,
                            fewshot_seed=DEFAULT_FEWSHOT_SEED)  # fmt: skip
    for record in records:
        completion = answer(record["doc"])
        record.update(responses=[completion], filtered={"none": [completion]}, metrics={"pass@1": 1.0})
    bd.add_run(submission, "humaneval", records, metrics=["pass@1"], protocol={"config_sha256": "0" * 64})
    return submission


def test_a_cheating_submission_scores_what_its_honest_answers_score_and_is_flagged_once(client):
    owner, admin = bd.user("owner@example.org"), bd.user("admin@example.org", staff=True)
    fair, cheat = stored(owner, "acme/fair", honest), stored(owner, "acme/cheat", cheating)

    runs_rescore(task="humaneval", admin=admin, comment="the tests hidden from the candidate (issue 47)")

    scores = {s.pk: Score.objects.get(run__submission=s, metric="pass@1").value for s in (fair, cheat)}
    assert scores[fair.pk] == pytest.approx(6 / 9) and scores[cheat.pk] == scores[fair.pk]
    for record in SampleRecord.objects.filter(run__submission=cheat):
        findings = record.payload["tampering"]
        assert "host reports: opened /program/tests.py" in findings, findings
        assert any(item.startswith("names the jail's hidden files ('/program')") for item in findings), findings
    assert not any(r.payload.get("tampering") for r in SampleRecord.objects.filter(run__submission=fair))

    cheat.refresh_from_db()
    fair.refresh_from_db()
    assert fair.review_state == "none"
    assert cheat.review_state == "flagged"
    assert cheat.review_reason.startswith(f"code execution: {DOCS} of {DOCS} humaneval documents have programs that tamper")
    flag = ReviewAction.objects.get(submission=cheat, admin__isnull=True)
    assert "opened /program/tests.py" in flag.comment or "hidden files" in flag.comment
    client.force_login(admin)
    page = client.get("/leaderboard/review/").content.decode()
    assert "acme/cheat" in page and "acme/fair" not in page

    runs_rescore(task="humaneval", admin=admin, comment="again")  # flagged once, whatever the re-scoring
    assert ReviewAction.objects.filter(submission=cheat, admin__isnull=True).count() == 1
