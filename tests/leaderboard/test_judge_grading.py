"""Single-answer judges on the site, with the real SmolLM2 as judge and answerer on the real database:
one grade per turn (turn 2 in context), reference-guided grading with given or judge-written
references, scores with bootstrap intervals per category and per turn, cost per 1,000 grades, panels
of judges with each judge's agreement, audits against human labels, and hostile configs refused."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from leaderboard.judging.panels import panel_refresh
from leaderboard.judging.services import judge_audit_request, judge_config_save, judge_run_request
from leaderboard.models import JudgeAnswer, JudgeAudit, JudgeConfig, JudgeGrade, JudgePanel, JudgeRun
from leaderboard.tasks import judge_audit, judge_run  # noqa: F401 - registers the tasks the eager app runs
from tests.leaderboard.judging_data import catalogue_model

pytestmark = pytest.mark.django_db

# A lenient grader: SmolLM2 rarely writes MT-Bench's [[n]], but it answers with a number when asked.
LENIENT = """name: lenient-grader
kind: single
user: "{wording}\\n\\nQuestion: {{question}}\\n\\nAnswer: {{answer}}\\n\\nYour rating (1-10):"
verdict:
  method: generate
  max_new_tokens: 6
  score:
    regex: '(\\d+)'
    min: 1
    max: 10
"""
WORDINGS = ("Rate the answer from 1 to 10. Reply with the number only.",
            "How good is this answer? Give one whole number between 1 and 10 and nothing else.")  # fmt: skip
QUESTIONS = [
    {"id": "capital", "text": "Name the capital of France.", "category": "knowledge"},
    {"id": "add", "text": "What is 17 + 25?", "category": "math", "reference": "42"},
    {"id": "rhyme", "text": "Give a word that rhymes with moon.", "category": "writing"},
]
TWO_TURN = [
    {"id": "note", "turns": ["Write one sentence inviting a neighbour to tea.", "Now make it more formal."],
     "category": "writing"},
    {"id": "sum", "turns": ["What is 6 times 7?"], "category": "math", "reference": "42"},
]  # fmt: skip


@pytest.fixture
def eager(celery_eager):
    """Tasks run in place (tests/conftest.py)."""


def grader(name: str, smollm2_dir, wording: str, **fields) -> JudgeConfig:
    fields.setdefault("instructions", QUESTIONS)
    return judge_config_save(JudgeConfig(
        name=name, judge_backend="hf", judge_model_args={"path": str(smollm2_dir), "dtype": "float32"},
        protocol_yaml=LENIENT.format(wording=wording), max_new_tokens=12, **fields,
    ))  # fmt: skip


def judged(config, model, capture, *, again=False) -> JudgeRun:
    with capture(execute=True):
        run = judge_run_request(config, model, again=again)
    assert run is not None
    run.refresh_from_db()
    assert run.status == "FINISHED", run.failure_reason
    return run


def test_two_graders_score_two_models_and_a_panel_combines_them(smollm2_dir, eager, client,
                                                                  django_capture_on_commit_callbacks):  # fmt: skip
    terse = catalogue_model("smol-terse", smollm2_dir, system_prompt="Answer in at most five words.")
    wordy = catalogue_model("smol-wordy", smollm2_dir, system_prompt="Answer at length, with headers.")
    first, second = (grader(f"grader-{i}", smollm2_dir, w) for i, w in enumerate(WORDINGS))
    assert first.kind == second.kind == "single" and first.baseline_id is None
    panel = JudgePanel.objects.create(name="two-graders")
    panel.members.set([first, second])

    runs = {(c.name, m.name): judged(c, m, django_capture_on_commit_callbacks)
            for c in (first, second) for m in (terse, wordy)}  # fmt: skip
    # Answers are generated once per model and question set, whichever judge asked first.
    assert JudgeAnswer.objects.filter(model=terse).count() == len(QUESTIONS)
    for run in runs.values():
        grades = list(run.grades.order_by("idx"))
        assert [g.question_id for g in grades] == ["capital", "add", "rhyme"] and {g.turn for g in grades} == {1}
        assert all(g.ok == (g.score is not None) for g in grades) and all(g.ok or g.error for g in grades)
        ok = [g.score for g in grades if g.ok]
        r = run.results
        assert r["kind"] == "single" and r["n"] == len(ok) and r["failed"] == len(grades) - len(ok)
        if ok:
            assert r["score"] == pytest.approx(sum(ok) / len(ok), abs=1e-9)
            assert set(r["by_category"]) <= {"knowledge", "math", "writing"}
        assert r["cost"]["judgments"] == len(grades) and r["cost"]["seconds_per_1000"] > 0
        assert r["cost"]["prompt_tokens_per_1000"] > 0  # counted with the judge's tokenizer

    # Asking again: nothing to do; forcing it asks the judge again only for the failed grades (a
    # failed grade is never cached), and every successful one comes back unchanged from the cache.
    with django_capture_on_commit_callbacks(execute=True):
        assert judge_run_request(first, terse) is None
    before = runs[("grader-0", "smol-terse")]
    again = judged(first, terse, django_capture_on_commit_callbacks, again=True)
    assert again.results["judgments_computed"] == before.results["failed"]
    kept = {g.question_id: g.score for g in before.grades.filter(ok=True)}
    assert {g.question_id: g.score for g in again.grades.filter(question_id__in=kept)} == kept

    panel.refresh_from_db()  # refreshed by the worker when each member's run finished
    report = panel.report
    assert report["kind"] == "single" and report["members"] == ["grader-0", "grader-1"]
    assert set(report["judges"]) == {"grader-0", "grader-1"}
    assert set(report["models"]) <= {"smol-terse", "smol-wordy"}

    page = client.get(f"/leaderboard/judges/{first.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Mean grade" in html and 'id="judge-cost"' in html and "two-graders" in html
    graded = client.get(f"/leaderboard/judges/{first.pk}/models/{terse.pk}/").content.decode()
    assert "Name the capital of France." in graded and 'data-turn="1"' in graded
    panel_html = client.get(f"/leaderboard/judges/panels/{panel.pk}/").content.decode()
    assert 'id="panel-judges"' in panel_html and "grader-1" in panel_html
    assert client.get("/leaderboard/judges/").content.decode().count(f"/leaderboard/judges/panels/{panel.pk}/") == 1

    download = client.get(f"/leaderboard/judges/{first.pk}/judgments.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert len(rows) == JudgeGrade.objects.filter(run__config=first).count() == 3 * len(QUESTIONS)  # terse's two runs
    assert {"question_id", "turn", "score", "protocol_sha256"} <= set(rows[0])
    api = client.get(f"/api/judges/{first.pk}/grades/?model={terse.pk}").json()
    assert api["count"] == 2 * len(QUESTIONS) and api["results"][0]["question_id"] == "capital"
    detail = client.get(f"/api/judges/{first.pk}/").json()
    assert detail["config"]["kind"] == "single" and detail["config"]["baseline"] is None
    assert detail["panels"][0]["name"] == "two-graders" and detail["cost"]["runs"] >= 2
    assert client.get(f"/api/judges/panels/{panel.pk}/").json()["report"]["kind"] == "single"
    for bad in ("?x=1", "?page=0"):
        assert client.get(f"/leaderboard/judges/panels/{panel.pk}/{bad}").status_code == 400
    assert client.get("/leaderboard/judges/panels/999999/").status_code == 404


def test_two_turn_questions_graded_in_context_with_given_then_judge_written_references(
    smollm2_dir, eager, client, django_capture_on_commit_callbacks, short_mt_bench_verdicts
):
    model = catalogue_model("smol", smollm2_dir)
    config = judge_config_save(JudgeConfig(
        name="mt-bench-smol", judge_backend="hf", judge_model_args={"path": str(smollm2_dir), "dtype": "float32"},
        protocol_name="mt-bench-single", instructions=TWO_TURN, max_new_tokens=8,
    ))  # fmt: skip
    run = judged(config, model, django_capture_on_commit_callbacks)
    answers = dict(((a.idx, a.turn), a.text) for a in JudgeAnswer.objects.filter(model=model))
    assert set(answers) == {(0, 1), (0, 2), (1, 1)}
    grades = {(g.question_id, g.turn): g for g in run.grades.all()}
    assert set(grades) == {("note", 1), ("note", 2), ("sum", 1)}
    # Three protocols of the family: plain turn 1, plain turn 2 in context, reference-guided maths.
    assert len({g.protocol_sha256 for g in grades.values()}) == 3
    assert grades[("sum", 1)].reference == "given" and grades[("note", 2)].reference == ""
    # SmolLM2 rarely writes [[n]]: a grade without one is stored as failed with the reason, never scored.
    for g in grades.values():
        assert (g.ok and 1 <= g.score <= 10) or (not g.ok and g.score is None and "no score" in g.error)
    assert run.results["n"] + run.results["failed"] == 3
    unchanged_failed = sum(1 for key, g in grades.items() if key[0] == "note" and not g.ok)

    config.reference_mode = JudgeConfig.ReferenceMode.JUDGE
    judge_config_save(config)
    written = judged(config, model, django_capture_on_commit_callbacks)
    grades = {(g.question_id, g.turn): g for g in written.grades.all()}
    assert grades[("sum", 1)].reference == "judge" and grades[("note", 1)].reference == ""
    # Only the maths grade changed its prompt; the others come from the cache (failed ones are asked again).
    assert written.results["judgments_computed"] == unchanged_failed + 1
    html = client.get(f"/leaderboard/judges/{config.pk}/models/{model.pk}/").content.decode()
    assert "Now make it more formal." in html and "reference-guided: judge" in html
    # Listed on the judge's page and API even when every grade failed (its score then says so).
    assert 'data-model="smol"' in client.get(f"/leaderboard/judges/{config.pk}/").content.decode()
    scores = client.get(f"/api/judges/{config.pk}/").json()["scores"]
    assert [s["model"] for s in scores] == ["smol"] and scores[0]["value"] == written.results["score"]


def test_a_grader_is_audited_against_human_labels_on_each_set(smollm2_dir, eager, client,
                                                              django_capture_on_commit_callbacks):  # fmt: skip
    config = grader("audited", smollm2_dir, WORDINGS[0])
    with django_capture_on_commit_callbacks(execute=True):
        for pairs, limit in (("judges/mtbench_human_majority.json", 2), ("judges/llmbar_natural.json", 1)):
            judge_audit_request(config, pairs_file=pairs, limit=limit)
    audits = list(JudgeAudit.objects.filter(config=config))
    assert [a.status for a in audits] == ["FINISHED", "FINISHED"], [a.failure_reason for a in audits]
    for audit in audits:
        accuracy = audit.report["accuracy_grades"]
        assert audit.report["kind"] == "single" and accuracy["interval"] == "mid-p"
        assert audit.report["pairs"] + len(audit.report["failed_pairs"]) == audit.limit
        if accuracy["n"]:
            assert accuracy["ci_low"] <= accuracy["value"] <= accuracy["ci_high"]
    html = client.get(f"/leaderboard/judges/{config.pk}/").content.decode()
    assert "judges/mtbench_human_majority.json" in html and "judges/llmbar_natural.json" in html
    assert html.count('class="audit"') == 2


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"questions_file": "../../etc/passwd"}, "questions_file", "without '..'"),
    ({"questions_file": "/etc/passwd"}, "questions_file", "relative to PODIUM_DATA_DIR"),
    ({"questions_file": "judges/missing.jsonl"}, "questions_file", "not a file"),
    ({"questions_file": "judges/llmbar_natural.json"}, "questions_file", ""),
    ({"references_file": "judges/llmbar_natural.json"}, "references_file", "give both"),
    ({"instructions": [{"turns": ["a", "b", "c"]}]}, "instructions", "0"),
    ({"instructions": [{"id": "x", "text": "a"}, {"id": "x", "text": "b"}]}, "instructions", "x"),
    ({"instructions": [{"text": "a", "colour": "red"}]}, "instructions", "colour"),
    ({"instructions": "not a list"}, "instructions", "list"),
    ({"instructions": [{"turns": ["a", "b"]}]}, "instructions", "two-turn"),
    ({"reference_mode": "psychic"}, "reference_mode", ""),
])  # fmt: skip
def test_hostile_single_answer_configs_are_refused_naming_the_field(smollm2_dir, fields, field, message):
    with pytest.raises(ValidationError) as caught:
        grader("hostile", smollm2_dir, WORDINGS[0], **fields)
    assert field in caught.value.message_dict, caught.value.message_dict
    assert message in " ".join(caught.value.message_dict[field])
    assert not JudgeConfig.objects.exists()


def test_kinds_and_baselines_must_agree(smollm2_dir):
    baseline = catalogue_model("smol-baseline", smollm2_dir)
    with pytest.raises(ValidationError) as caught:
        grader("with-baseline", smollm2_dir, WORDINGS[0], baseline=baseline)
    assert "no baseline" in " ".join(caught.value.message_dict["baseline"])
    pairwise = JudgeConfig(name="pairwise", judge_backend="hf", judge_model_args={"path": str(smollm2_dir)},
                           protocol_name="alpacaeval-logprob")  # fmt: skip
    with pytest.raises(ValidationError) as caught:
        judge_config_save(pairwise)
    assert "baseline" in caught.value.message_dict
    pairwise.baseline, pairwise.questions_file = baseline, "sample"
    with pytest.raises(ValidationError) as caught:
        judge_config_save(pairwise)
    assert "instructions field" in " ".join(caught.value.message_dict["questions_file"])
    # With neither questions nor a file, a single-answer judge uses the bundled two-turn sample.
    sample = judge_config_save(JudgeConfig(name="sample", judge_backend="hf", judge_model_args={"path": str(smollm2_dir)},
                                           protocol_name="mt-bench-single"))  # fmt: skip
    assert sample.questions_file == "sample" and sample.kind == "single" and len(sample.instructions_sha256) == 64


def test_panels_refuse_mixed_kinds_and_lone_judges_in_the_admin(smollm2_dir, client):
    admin = get_user_model().objects.create_superuser("admin@example.org", "admin@example.org", "pw-admin-42")
    client.force_login(admin)
    baseline = catalogue_model("smol-baseline", smollm2_dir)
    single = grader("single", smollm2_dir, WORDINGS[0])
    pairwise = judge_config_save(JudgeConfig(name="pairwise", judge_backend="hf", baseline=baseline,
                                             judge_model_args={"path": str(smollm2_dir)}, protocol_name="alpacaeval-logprob"))  # fmt: skip
    for members, message in (([single.pk, pairwise.pk], "one kind"), ([single.pk], "at least two")):
        response = client.post("/admin/leaderboard/judgepanel/add/", {"name": "p", "description": "", "members": members})
        assert response.status_code == 200 and message in response.content.decode()
    assert not JudgePanel.objects.exists()
    other = grader("single-2", smollm2_dir, WORDINGS[1])
    response = client.post("/admin/leaderboard/judgepanel/add/", {"name": "p", "description": "", "members": [single.pk, other.pk]})
    assert response.status_code == 302
    panel = JudgePanel.objects.get()
    assert panel.refreshed_at is not None and panel.report["kind"] == "single"  # computed on save, no model call
    assert client.get(f"/leaderboard/judges/panels/{panel.pk}/").status_code == 200
    assert panel_refresh(panel.pk).report == panel.report
    assert json.dumps(panel.report)  # JSON-able


def test_log_prob_grades_are_stored_and_shown_as_expected_ratings(smollm2_dir, eager, client,
                                                                  django_capture_on_commit_callbacks):  # fmt: skip
    """The demo's grader protocol: every answer gets a grade (SmolLM2 never has to write [[n]]), the
    expected rating equals a direct transformers computation, and the page, CSV and API say it is a
    log-prob grade with its mass and distribution."""
    from evalcore.judging.protocol import load_protocol
    from tests.evalcore.judging.test_logprob_grading import direct_grade
    from tests.evalcore.models._shared import smollm2_backend

    model = catalogue_model("smol", smollm2_dir)
    config = judge_config_save(JudgeConfig(
        name="mt-bench-logprob-smol", judge_backend="hf",
        judge_model_args={"path": str(smollm2_dir), "dtype": "float32"},
        protocol_name="mt-bench-single-logprob", instructions=TWO_TURN, max_new_tokens=8,
    ))  # fmt: skip
    run = judged(config, model, django_capture_on_commit_callbacks)
    grades = {(g.question_id, g.turn): g for g in run.grades.all()}
    assert set(grades) == {("note", 1), ("note", 2), ("sum", 1)}
    for g in grades.values():
        assert g.ok and 1.0 <= g.score <= 10.0 and g.score != round(g.score)  # an expected rating, a float
        record = g.logprob
        assert record["scale"] == list(range(1, 11)) and record["prefix"] == "Rating: [["
        assert sum(record["probabilities"]) == pytest.approx(1.0, abs=1e-4)
        assert g.score == pytest.approx(sum(p * r for p, r in zip(record["probabilities"], record["scale"])), abs=1e-4)
        assert 0 < record["mass"] <= 1 and 0 <= record["entropy"] <= 1
    assert run.results["n"] == 3 and run.results["failed"] == 0
    assert run.results["score"] == pytest.approx(sum(g.score for g in grades.values()) / 3, abs=1e-4)
    # Turn 1 of the writing question, recomputed with transformers alone.
    answer = JudgeAnswer.objects.get(model=model, idx=0, turn=1).text
    from evalcore.judging.grading import GradeItem

    expected, probs, mass = direct_grade(smollm2_backend(str(smollm2_dir)), load_protocol("mt-bench-single-logprob"),
                                         GradeItem("note", TWO_TURN[0]["turns"][0], answer))  # fmt: skip
    assert grades[("note", 1)].score == pytest.approx(expected, abs=1e-4)
    assert grades[("note", 1)].logprob["probabilities"] == pytest.approx(probs, abs=1e-4)

    html = client.get(f"/leaderboard/judges/{config.pk}/models/{model.pk}/").content.decode()
    assert html.count("Log-prob grade <strong>") == 3
    assert f"{grades[('note', 1)].score:.4f}" in html and "mass on the scale" in html
    download = client.get(f"/leaderboard/judges/{config.pk}/judgments.csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert {r["grade_method"] for r in rows} == {"logprob"}
    by_key = {(r["question_id"], int(r["turn"])): r for r in rows}
    assert float(by_key[("note", 1)]["score"]) == grades[("note", 1)].score
    assert float(by_key[("note", 1)]["scale_mass"]) == grades[("note", 1)].logprob["mass"]
    assert by_key[("note", 1)]["probabilities"].startswith("1:") and " 10:" in by_key[("note", 1)]["probabilities"]
    jsonl = b"".join(client.get(f"/leaderboard/judges/{config.pk}/judgments.jsonl").streaming_content).decode()
    assert {json.loads(line)["grade_method"] for line in jsonl.splitlines()} == {"logprob"}
    api = client.get(f"/api/judges/{config.pk}/grades/?model={model.pk}").json()
    assert {r["logprob"]["prefix"] for r in api["results"]} == {"Rating: [["}
