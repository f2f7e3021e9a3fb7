"""Admins configure judges in the admin (validated by the service, hostile input refused on the field),
queue judge runs and audits by action, and import an audit made by ``python -m evalcore judge audit``
(refused when its figures do not recompute from its judgments)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from evalcore.cli import main as evalcore_main
from leaderboard.models import JudgeAudit, JudgeConfig, JudgeRun
from tests.leaderboard.judging_data import catalogue_model, judge_setup

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    admin = get_user_model().objects.create_superuser("admin@example.org", "admin@example.org", "pw-admin-42")
    client.force_login(admin)
    return client


def form(baseline, smollm2_dir, **changes) -> dict:
    data = {"name": "new-judge", "judge_backend": "hf", "judge_model_args": json.dumps({"path": str(smollm2_dir)}),
            "protocol_name": "arena-hard", "protocol_yaml": "", "baseline": baseline.pk, "instructions": "[]",
            "max_new_tokens": "32", "active": "on", "questions_file": "", "references_file": "", "reference_mode": "given"}  # fmt: skip
    return {**data, **changes}


@pytest.mark.parametrize(("changes", "message"), [
    ({"protocol_name": "/etc/passwd"}, "not bundled"),
    ({"protocol_yaml": "name: x\nkind: pairwise\nuser: '{question} {answer_a}'\nverdict: {method: logprob}"}, "answer_b"),
    ({"instructions": '["fine", 3]'}, "instruction 1"),
    ({"instructions": "{not json"}, "Enter a valid JSON"),
    ({"judge_backend": "", "judge_model_args": "{}"}, "needs a catalogue model"),
    ({"max_new_tokens": "100000"}, "less than or equal to 4096"),
    ({"name": ""}, "This field is required"),
])  # fmt: skip
def test_hostile_judge_configs_are_refused_on_the_field(staff_client, smollm2_dir, changes, message):
    baseline = catalogue_model("smol-baseline", smollm2_dir)
    response = staff_client.post("/admin/leaderboard/judgeconfig/add/", form(baseline, smollm2_dir, **changes))
    assert response.status_code == 200 and message in response.content.decode()
    assert not JudgeConfig.objects.exists()


def test_a_valid_config_gets_the_default_instructions_and_hashes(staff_client, smollm2_dir):
    baseline = catalogue_model("smol-baseline", smollm2_dir)
    response = staff_client.post("/admin/leaderboard/judgeconfig/add/", form(baseline, smollm2_dir))
    assert response.status_code == 302
    config = JudgeConfig.objects.get()
    assert len(config.instructions) == 12 and len(config.protocol_sha256) == 64 and len(config.instructions_sha256) == 64
    for page in ("judgeconfig", "judgerun", "judgeaudit", f"judgeconfig/{config.pk}/change"):
        assert staff_client.get(f"/admin/leaderboard/{page}/").status_code == 200, page


def test_actions_queue_runs_for_every_arena_model_and_an_audit(staff_client, smollm2_dir, django_capture_on_commit_callbacks):
    setup = judge_setup(smollm2_dir)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        for action in ("judge_every_model", "audit"):
            response = staff_client.post("/admin/leaderboard/judgeconfig/",
                                         {"action": action, "_selected_action": [setup["config"].pk]})  # fmt: skip
            assert response.status_code == 302
    # the baseline is not judged against itself; the two others are, once
    assert sorted(JudgeRun.objects.values_list("model__name", flat=True)) == ["smol-terse", "smol-wordy"]
    assert JudgeAudit.objects.get().pairs_file == "judges/llmbar_natural.json"
    assert len(sent) == 3


def test_an_evalcore_audit_is_imported_after_its_figures_recompute(smollm2_dir, shared_data, tmp_path):
    config = judge_setup(smollm2_dir)["config"]
    out = tmp_path / "audit"
    pairs = str(shared_data / "judges" / "llmbar_natural.json")
    code = evalcore_main(["judge", "audit", pairs, "--model", "hf", "--model-args", f"path={smollm2_dir},dtype=float32",
                          "--protocol", "alpacaeval-logprob", "--out", str(out), "--limit", "3", "--rounds", "50"])  # fmt: skip
    assert code == 0
    call_command("judge_audit_import", config.name, str(out))
    audit = JudgeAudit.objects.get()
    report = json.loads((out / "report.json").read_text())
    assert audit.status == "FINISHED" and audit.report["pairs"] == 3
    assert audit.report["accuracy_swap_average"] == report["accuracy_swap_average"]

    tampered = json.loads((out / "report.json").read_text())
    tampered["accuracy_swap_average"]["value"] = 1.0
    (out / "report.json").write_text(json.dumps(tampered))
    with pytest.raises(CommandError, match="does not match"):
        call_command("judge_audit_import", config.name, str(out))
    (out / "judgments.jsonl").write_text("{broken\n")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("judge_audit_import", config.name, str(out))
    with pytest.raises(CommandError, match="no judge config"):
        call_command("judge_audit_import", "nobody", str(out))
