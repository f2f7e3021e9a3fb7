"""``python -m evalcore judge grade`` and ``judge panel``: the real SmolLM2 answers two bundled two-turn
questions and grades them (a lenient protocol, so grades succeed), a re-run makes no model call, a
second judge (another protocol) grades the same answers from their file, the two form a panel; hostile
input is one line and exit code 2 before any model loads."""

from __future__ import annotations

import json
import shutil

import pytest

from evalcore.cli import main
from evalcore.judging.answer_files import read_model_answers
from evalcore.judging.questions import SAMPLE_QUESTIONS, read_questions

# SmolLM2-135M rarely writes MT-Bench's [[n]]; asked for points out of 10 it names a number.
LENIENT = """name: lenient-{tag}
kind: single
system: You grade answers. Always reply with a number from 1 to 10.
user: "Question: {{question}}\\nAnswer: \\"{{answer}}\\"\\n\\nHow many points out of 10 does the answer {verb}?"
verdict: {{method: generate, max_new_tokens: 10, score: {{regex: '(\\d+)', min: 0, max: 100}}}}
"""
LENIENT_MULTI = """name: lenient-multi-{tag}
kind: single
turns: 2
system: You grade answers. Always reply with a number from 1 to 10.
user: "Question: {{question_2}} (after: {{question_1}})\\nAnswer: \\"{{answer_2}}\\"\\n\\nHow many points out of 10 does the answer {verb}? (Earlier answer: \\"{{answer_1}}\\")"
verdict: {{method: generate, max_new_tokens: 10, score: {{regex: '(\\d+)', min: 0, max: 100}}}}
"""


def _protocols(folder, tag: str, verb: str) -> list[str]:
    one, two = folder / f"{tag}.yaml", folder / f"{tag}-multi.yaml"
    one.write_text(LENIENT.format(tag=tag, verb=verb))
    two.write_text(LENIENT_MULTI.format(tag=tag, verb=verb))
    return ["--protocol", str(one), "--protocol-multi", str(two)]


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_grade_rerun_from_cache_and_panel_of_two_judges(tmp_path, smollm2_dir, capsys):
    model = f"path={smollm2_dir},dtype=float32,device=cpu"
    out1, out2, panel = tmp_path / "judge-a", tmp_path / "judge-b", tmp_path / "panel"
    argv = ["judge", "grade", "--questions", "sample", "--limit", "2", "--answers-from", f"smol=hf:{model}",
            "--judge", "hf", "--judge-args", model, *_protocols(tmp_path, "a", "get"), "--max-new-tokens", "8",
            "--rounds", "50", "--out", str(out1)]  # fmt: skip
    assert main(argv) in (0, 1), capsys.readouterr().err  # 1: some grade failed (recorded, not a score)
    questions = read_questions(SAMPLE_QUESTIONS)[:2]
    grades = _lines(out1 / "grades.jsonl")
    assert [(g["model"], g["question_id"], g["turn"]) for g in grades] == [
        ("smol", q.question_id, t) for q in questions for t in (1, 2)]  # fmt: skip
    ok = [g for g in grades if g["status"] == "ok"]
    assert len(ok) >= 3  # on our machine all 4: the lenient protocol gets a number out of SmolLM2
    for g in grades:
        assert not g["cached"] and g["reference"] is None and g["raw"]
        assert g["protocol"] == ("lenient-a" if g["turn"] == 1 else "lenient-multi-a") and len(g["protocol_sha256"]) == 64
        assert (isinstance(g["score"], float) and g["error"] is None) if g in ok else (g["score"] is None and g["error"])
    report = json.loads((out1 / "report.json").read_text())
    smol = report["models"]["smol"]
    assert smol["n"] == len(ok) and smol["failed"] == 4 - len(ok)
    assert smol["mean"] == pytest.approx(sum(g["score"] for g in ok) / len(ok))
    assert set(smol["by_turn"]) == {"t1", "t2"} and set(smol["by_category"]) == {q.category for q in questions}
    assert report["questions"]["count"] == 2 and report["questions"]["turns"] == 4
    assert len(report["questions"]["sha256"]) == 64 and len(report["protocol"]["sha256"]) == 64
    assert report["judge"]["weights_sha256"] and report["reference_mode"] == "given"
    assert report["cost"]["judgments"] == 4 and report["cost"]["seconds_per_1000"] > 0
    assert report["cost"]["prompt_tokens_per_1000"] > 0 and report["cost"]["completion_tokens_per_1000"] > 0
    assert report["this_run"]["judge_calls"] >= 1
    assert report["this_run"] == {"grades_computed": 4, "grades_cached": 0, "answer_turns_generated": 4,
                                  "judge_calls": report["this_run"]["judge_calls"]}  # fmt: skip
    assert any("self-preference" in note for note in report["notes"])

    # The re-run reads answers and successful grades from the cache: no model call (a failed grade is
    # retried, and greedy decoding fails it again), the same figures.
    capsys.readouterr()
    main(argv)
    again = json.loads((out1 / "report.json").read_text())
    failed = 4 - len(ok)
    assert again["this_run"] == {"grades_computed": failed, "grades_cached": len(ok), "answer_turns_generated": 0,
                                 "judge_calls": 1 if failed else 0}  # fmt: skip
    assert again["models"] == report["models"]
    if not failed:
        assert {k: v for k, v in again.items() if k != "this_run"} == {
            k: v for k, v in report.items() if k != "this_run"}  # fmt: skip
        assert "4 grades: 0 computed, 4 from the cache" in capsys.readouterr().out
    assert [g["cached"] for g in _lines(out1 / "grades.jsonl")] == [g in ok for g in grades]
    answers = read_model_answers(out1 / "answers" / "smol.jsonl", questions)
    assert [len(a) for a in answers] == [2, 2]

    # A second judge (another protocol) grades the same answers, read from the first run's file.
    argv2 = ["judge", "grade", "--questions", "sample", "--limit", "2", "--answers",
             f"smol={out1 / 'answers' / 'smol.jsonl'}", "--model", "hf", "--model-args", model,
             *_protocols(tmp_path, "b", "deserve"), "--rounds", "50", "--out", str(out2)]  # fmt: skip
    assert main(argv2) in (0, 1)  # a grade the judge fails is recorded as failed (exit 1), not a score
    second = json.loads((out2 / "report.json").read_text())
    assert second["this_run"]["answer_turns_generated"] == 0 and second["models"]["smol"]["answers"]["from"] == "file"
    assert second["models"]["smol"]["answers"]["sha256"] == report["models"]["smol"]["answers"]["sha256"]

    capsys.readouterr()
    assert main(["judge", "panel", str(out1), f"other={out2}", "--rounds", "50", "--out", str(panel)]) == 0
    result = json.loads((panel / "panel.json").read_text())
    assert result["kind"] == "single" and result["method"] == "mean of per-judge z-scores"
    assert set(result["judges"]) == {"judge-a", "other"} and set(result["models"]) == {"smol"}
    assert result["members"]["other"]["protocol"]["members"]["single"]["name"] == "lenient-b"
    assert result["most_disagreeing"] is None  # two judges
    assert result["questions_sha256"] == report["questions"]["sha256"]
    json.dumps(result, allow_nan=False)

    # The same judge twice, a copy of a folder: refused.
    shutil.copytree(out1, tmp_path / "copy")
    assert main(["judge", "panel", str(out1), str(tmp_path / "copy"), "--out", str(tmp_path / "p2")]) == 2
    assert "are the same judge" in _error(capsys)


# -- hostile input: one line, exit 2, before any model loads (the judge path does not exist) -------------
def _questions_file(tmp_path, lines: list[str]) -> str:
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


ONE = '{"question_id": "q1", "category": "math", "turns": ["What is 2+2?", "And 3+3?"]}'
TWO = '{"question_id": 2, "turns": ["Say hi."]}'


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--questions", "{tmp}/nope.jsonl"], "does not exist"),
        (["--questions", "{q_bad}"], "bad.jsonl: line 1 is not valid JSON"),
        (["--questions", "sample", "--protocol", "no-such-protocol"], "is neither a file nor a bundled protocol"),
        (["--questions", "sample", "--reference-mode", "maybe"], "--reference-mode must be one of given, judge, none"),
        (["--questions", "sample", "--protocol-multi", "mt-bench-single-multi"], "the mt-bench family has its own"),
        (["--questions", "sample", "--protocol", "mt-bench-single"], "the questions have two turns"),
        (["--questions", "{q}", "--protocol", "mt-bench-single", "--protocol-multi", "mt-bench-single"],
         "is not a two-turn single-answer protocol"),
        (["--questions", "{q}", "--protocol", "mt-bench-single", "--protocol-multi", "mt-bench-single-multi",
          "--reference-mode", "judge"], "--reference-mode judge: --protocol mt-bench-single has no reference"),
        (["--questions", "{q}", "--answers", "m={answers_missing}"], "--answers m: answers file a.jsonl: no answer to question '2'"),
        (["--questions", "{q}", "--answers", "m={answers_turns}"], "a.jsonl: line 1: 1 answer turn(s) for question 'q1', which has 2"),
        (["--questions", "{q}", "--answers", "m={answers_bad}"], "a.jsonl: line 2 is not valid JSON"),
        (["--questions", "{q}", "--answers", "m={tmp}/none.jsonl"], "answers file"),
        (["--questions", "{q}", "--answers", "m/x={answers_ok}"], "is not NAME=FILE"),
        (["--questions", "{q}", "--answers", "m={answers_ok}", "--answers", "m={answers_ok}"], "model name 'm' is given twice"),
        (["--questions", "{q}"], "give at least one model to grade"),
        (["--questions", "{q}", "--answers-from", "bad-spec"], "is not NAME=BACKEND:key=value"),
        (["--questions", "{q}", "--limit", "0"], "--limit must be at least 1"),
        (["--questions", "{q}", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
        (["--questions", "{q}", "--answers", "m={answers_ok}", "--out", "{tmp}/afile/out"], "not a writable folder"),
    ],
)
def test_grade_hostile_input_is_one_line(extra, message, tmp_path, capsys):
    q = _questions_file(tmp_path, [ONE, TWO])
    (tmp_path / "bad.jsonl").write_text('{"question_id": "q1", "turns": ["x"]\n')
    answers = {
        "answers_ok": ['{"question_id": "q1", "choices": [{"turns": ["4", "6"]}]}',
                       '{"question_id": 2, "choices": [{"turns": ["hi"]}]}'],
        "answers_missing": ['{"question_id": "q1", "choices": [{"turns": ["4", "6"]}]}'],
        "answers_turns": ['{"question_id": "q1", "choices": [{"turns": ["4"]}]}'],
        "answers_bad": ['{"question_id": "q1", "choices": [{"turns": ["4", "6"]}]}', "{not json"],
    }  # fmt: skip
    paths = {"tmp": str(tmp_path), "q": q, "q_bad": str(tmp_path / "bad.jsonl")}
    for key, lines in answers.items():
        folder = tmp_path / key
        folder.mkdir()
        (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
        paths[key] = str(folder / "a.jsonl")
    (tmp_path / "afile").write_text("")
    args = [a.format(**paths) for a in extra]
    if not {"--answers", "--answers-from"} & set(args) and "at least one model" not in message:
        args += ["--answers-from", f"m=hf:path={tmp_path}/no-model"]
    out = [] if "--out" in args else ["--out", str(tmp_path / "out")]
    code = main(["judge", "grade", "--judge", "hf", "--judge-args", f"path={tmp_path}/no-model", *args, *out])
    assert code == 2
    assert message in _error(capsys)
    assert not (tmp_path / "out").exists()


# -- panels of fabricated folders (no model) -------------------------------------------------------------
def _grade_dir(root, name: str, *, judge: str, scores: dict, questions: str = "qs", answers: str = "as") -> str:
    folder = root / name
    folder.mkdir()
    report = {"kind": "single", "judge_key": judge, "judge": {"name": judge}, "reference_mode": "given",
              "protocol": {"sha256": "p"}, "questions": {"sha256": questions},
              "models": {m: {"answers": {"sha256": answers}} for m in scores}}  # fmt: skip
    (folder / "report.json").write_text(json.dumps(report))
    rows = [{"model": m, "item_id": i, "status": "ok" if s is not None else "failed", "score": s}
            for m, items in scores.items() for i, s in items.items()]  # fmt: skip
    (folder / "grades.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def _run_dir(root, name: str, *, judge: str, wins: dict) -> str:
    """A judge run folder: baseline 'base', each model's judgments in both orders (P(first) per order)."""
    folder = root / name
    (folder / "answers").mkdir(parents=True)
    results = {"baseline": "base", "models": {m: {} for m in wins}, "judge": {"name": judge},
               "protocol": {"name": "p", "sha256": "p"}}  # fmt: skip
    (folder / "results.json").write_text(json.dumps(results))
    for m in ["base", *wins]:
        rows = [{"instruction_id": str(k), "instruction": f"i{k}", "answer": f"{m}{k}", "model": m} for k in range(3)]
        (folder / "answers" / f"{m}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = []
    for m, won in wins.items():
        for k, w in enumerate(won):
            rows.append({"model": m, "pair_id": f"{m}/{k}", "order": "ab", "status": "ok", "p_first": 1.0 - w})
            rows.append({"model": m, "pair_id": f"{m}/{k}", "order": "ba", "status": "ok", "winner": "A" if w else "B"})
    (folder / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def test_pairwise_panel_from_judge_run_folders(tmp_path, capsys):
    a = _run_dir(tmp_path, "a", judge="j1", wins={"m1": [1, 1, 0], "m2": [0, 0, 1]})
    b = _run_dir(tmp_path, "b", judge="j2", wins={"m1": [1, 0, 0], "m2": [0, 0, 1]})
    assert main(["judge", "panel", a, b, "--rounds", "50", "--out", str(tmp_path / "p")]) == 0
    result = json.loads((tmp_path / "p" / "panel.json").read_text())
    assert result["kind"] == "pairwise" and result["method"] == "bradley_terry_pooled"
    assert set(result["ratings"]) == {"base", "m1", "m2"}
    assert result["judges"]["a"]["judgments"] == 6
    assert result["judges"]["a"]["agreement"]["n"] == 6 and result["judges"]["a"]["agreement"]["value"] == 5 / 6


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}})], "at least two judge folders"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}), str(t / "missing")], "is not a folder"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}), str(t)],
         "holds neither a judge grade report.json nor a judge run results.json"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}),
                    _run_dir(t, "b", judge="j2", wins={"m": [1, 0, 1]})], "a panel combines judges of one kind"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}),
                    _grade_dir(t, "b", judge="j2", scores={"m": {"q/t1": 5.0}}, questions="other")],
         "graded different question sets"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}),
                    _grade_dir(t, "b", judge="j2", scores={"m": {"q/t1": 5.0}}, answers="other")],
         "model 'm' has different answers"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}),
                    _grade_dir(t, "b", judge="j1", scores={"m": {"q/t1": 6.0}})], "are the same judge"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}})] * 2, "is given twice"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}),
                    "a=" + _grade_dir(t, "b", judge="j2", scores={"m": {"q/t1": 5.0}})], "two judges are named 'a'"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}),
                    _grade_dir(t, "b", judge="j2", scores={"m": {"q/t1": "high"}})], "an ok grade needs a numeric score"),
        (lambda t: [_grade_dir(t, "a", judge="j1", scores={"m": {"q/t1": 5.0}}),
                    _grade_dir(t, "b", judge="j2", scores={"x": {"q/t1": 5.0}}) + "/../b"], None),
    ],
)
def test_panel_hostile_input_is_one_line(build, message, tmp_path, capsys):
    dirs = build(tmp_path)
    if message is None:  # a well-formed panel (a model only one judge graded is allowed)
        assert main(["judge", "panel", *dirs, "--rounds", "20", "--out", str(tmp_path / "p")]) == 0
        return
    assert main(["judge", "panel", *dirs, "--out", str(tmp_path / "p")]) == 2
    assert message in _error(capsys)
    assert not (tmp_path / "p").exists()


def test_panel_refuses_a_malformed_grades_file(tmp_path, capsys):
    a = _grade_dir(tmp_path, "a", judge="j1", scores={"m": {"q/t1": 5.0}})
    b = _grade_dir(tmp_path, "b", judge="j2", scores={"m": {"q/t1": 5.0}})
    (tmp_path / "b" / "grades.jsonl").write_text('{"model": "m", "item_id": "q/t1"\n')
    assert main(["judge", "panel", a, b, "--out", str(tmp_path / "p")]) == 2
    assert "grades.jsonl: line 1 is not valid JSON" in _error(capsys)
