"""``manage.py demo_judge`` (run by ``make demo``): the pairwise judge and the single-answer grader are
configured once (idempotent), with their runs queued for the arena models."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from leaderboard.models import JudgeConfig, JudgeRun
from tests.leaderboard.judging_data import catalogue_model

pytestmark = pytest.mark.django_db


def test_demo_judge_configures_both_judges_once(smollm2_dir, settings):
    settings.PODIUM_MODELS_DIR = str(smollm2_dir.parent)
    catalogue_model("smollm2-135m-t0.9", smollm2_dir)
    catalogue_model("smollm2-135m-verbose", smollm2_dir)
    for _ in range(2):  # a second `make demo` changes nothing
        out = io.StringIO()
        call_command("demo_judge", stdout=out)
    judge, grader = JudgeConfig.objects.get(name="smollm2-judge"), JudgeConfig.objects.get(name="smollm2-grader")
    assert judge.kind == "pairwise" and judge.baseline.name == "smollm2-135m-t0.9"
    assert grader.kind == "single" and grader.baseline_id is None and not grader.active
    # Log-prob grades: SmolLM2 rarely writes [[n]], so a parsed grader would grade nothing.
    assert grader.protocol_name == "mt-bench-single-logprob"
    assert [(q["id"], len(q["turns"]), "references" in q) for q in grader.instructions] == [
        ("writing-1", 2, False), ("math-1", 2, True)]  # fmt: skip
    assert JudgeRun.objects.filter(config=grader).count() == 2  # both arena models, one run each
    assert JudgeRun.objects.filter(config=judge).count() == 1  # the baseline is not judged against itself
    assert "Grader smollm2-grader" in out.getvalue()


def test_demo_judge_switches_an_older_parsed_grader_to_log_prob_grades(smollm2_dir, settings):
    from leaderboard.judging.services import judge_config_save

    settings.PODIUM_MODELS_DIR = str(smollm2_dir.parent)
    catalogue_model("smollm2-135m-t0.9", smollm2_dir)
    catalogue_model("smollm2-135m-verbose", smollm2_dir)
    call_command("demo_judge", stdout=io.StringIO())
    grader = JudgeConfig.objects.get(name="smollm2-grader")
    new_sha = grader.protocol_sha256
    grader.protocol_name = "mt-bench-single"  # what an older `make demo` configured
    judge_config_save(grader)
    JudgeRun.objects.filter(config=grader).update(status=JudgeRun.Status.FINISHED,
                                                  protocol_sha256=grader.protocol_sha256)  # fmt: skip
    call_command("demo_judge", stdout=io.StringIO())
    grader.refresh_from_db()
    assert grader.protocol_name == "mt-bench-single-logprob" and grader.protocol_sha256 == new_sha
    # The parsed runs stand; each arena model is queued again under the log-prob protocol.
    assert JudgeRun.objects.filter(config=grader, status=JudgeRun.Status.PENDING).count() == 2
