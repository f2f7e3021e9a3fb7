"""``python -m evalcore judge grade`` with references (docs/judging.md, "Command line"): the real SmolLM2
answers and judges two of the bundled two-turn sample questions (writing-1, which has no reference,
and math-1, a reference category), under the mt-bench family.

- ``--reference-mode given`` with ``--references FILE`` (math-1 alone, ``--limit 1``): it is graded by the reference-guided
  members against the file's reference (it replaces the question's own).
- ``--reference-mode judge``: the judge answers math-1 first (only the reference categories), its
  answers are stored under ``reference:<judge key>:<sha256 of the turns and max_new_tokens>`` and the
  grades are made against them, writing-1's by the plain members; a re-run reads them back and
  generates none (a stored reference replaced in the cache is what the re-run's grade prompts contain).

Each grade's ``prompt_sha256`` is checked against the prompt rebuilt from the answers and the expected
reference, so "graded against a reference" means that reference was in the prompt. SmolLM2-135M
rarely writes MT-Bench's ``[[n]]``: grades may fail (recorded as failed, exit 1); the prompts are the
same either way. Hostile reference and question input is one ``error:`` line and exit code 2.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from evalcore.cli import main
from evalcore.judging.answer_files import read_model_answers
from evalcore.judging.cache import SqliteStore
from evalcore.judging.grading import load_grading_protocols
from evalcore.judging.judge import prompt_sha256
from evalcore.judging.questions import SAMPLE_QUESTIONS, read_questions

CHOSEN = ("math-1", "writing-1")  # in this order: --limit 1 keeps math-1
GIVEN = ("REFERENCE-FROM-FILE: the width is 5 and the length 15.", "REFERENCE-FROM-FILE: 7 by 17, area 119.")
STORED = ("STORED-REFERENCE-1 from the cache", "STORED-REFERENCE-2 from the cache")
MAX_NEW_TOKENS = 8
def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def _questions_file(tmp_path) -> str:
    """The bundled sample's math-1 and writing-1, as they are."""
    lines = {json.loads(line)["question_id"]: line for line in SAMPLE_QUESTIONS.read_text().splitlines()}
    lines = [lines[question_id] for question_id in CHOSEN]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _expected_prompts(questions, answers, references: dict) -> dict[str, tuple[str, bool]]:
    """item id -> (prompt SHA-256, graded against a reference) as the mt-bench family builds them."""
    family = load_grading_protocols("mt-bench")
    found = {}
    for question, turns in zip(questions, answers):
        refs = references.get(question.question_id, ())
        guided = bool(refs) and family.guided(question.category)
        for turn in (1, 2):
            plain, with_ref = (family.single, family.reference) if turn == 1 else (family.single_multi, family.reference_multi)
            protocol = with_ref if guided else plain
            messages = protocol.conversation_messages(questions=question.turns[:turn], answers=tuple(turns[:turn]),
                                                      references=tuple(refs[:turn]) if guided else None)  # fmt: skip
            found[f"{question.question_id}/t{turn}"] = (prompt_sha256(messages, None), guided)
    return found


def _graded(out) -> dict[str, tuple[str, bool]]:
    return {g["item_id"]: (g["prompt_sha256"], g["reference"] is not None) for g in _lines(out / "grades.jsonl")}


def _reference_key(judge_key: str, question) -> str:
    """The documented key: reference:<judge key>:<sha256 of the turns and max_new_tokens>."""
    payload = json.dumps({"turns": list(question.turns), "max_new_tokens": MAX_NEW_TOKENS}, ensure_ascii=False)
    return f"reference:{judge_key}:{hashlib.sha256(payload.encode('utf-8')).hexdigest()}"


def test_grade_against_given_and_judge_written_references(tmp_path, smollm2_dir, capsys, short_mt_bench_verdicts):
    questions_path = _questions_file(tmp_path)
    questions = read_questions(questions_path)
    math, writing = questions
    assert (writing.category, math.category) == ("writing", "math") and math.references and not writing.references
    model = f"path={smollm2_dir},dtype=float32,device=cpu"
    cache = tmp_path / "cache.sqlite"  # one cache for both modes: the answers are generated once
    common = ["judge", "grade", "--questions", questions_path, "--answers-from", f"smol=hf:{model}", "--judge", "hf",
              "--judge-args", model, "--max-new-tokens", str(MAX_NEW_TOKENS), "--rounds", "20",
              "--cache", str(cache)]  # fmt: skip

    # given (math-1 alone: writing-1's plain grading is seen below): the reference file's answers replace
    # math-1's own, and are what its grade prompts hold.
    references = tmp_path / "reference.jsonl"
    references.write_text(json.dumps({"question_id": "math-1", "model_id": "test", "choices": [{"index": 0, "turns": list(GIVEN)}]}) + "\n")
    given = tmp_path / "given"
    assert main([*common, "--references", str(references), "--reference-mode", "given", "--limit", "1",
                 "--out", str(given)]) in (0, 1)  # fmt: skip
    capsys.readouterr()
    answers = read_model_answers(given / "answers" / "smol.jsonl", [math])
    assert _graded(given) == _expected_prompts([math], answers, {"math-1": GIVEN})
    assert _graded(given) != _expected_prompts([math], answers, {"math-1": math.references})
    rows = {g["item_id"]: g for g in _lines(given / "grades.jsonl")}
    assert [rows[f"math-1/t{t}"]["protocol"] for t in (1, 2)] == ["mt-bench-single-reference", "mt-bench-single-reference-multi"]
    assert [rows[f"math-1/t{t}"]["reference"] for t in (1, 2)] == ["given", "given"]
    report = json.loads((given / "report.json").read_text())
    assert report["reference_mode"] == "given" and report["questions"]["references"] == str(references)
    assert report["this_run"]["answer_turns_generated"] == 2
    assert report["protocol"]["reference_categories"] == ["math", "reasoning", "coding"]

    # judge: the judge answers math-1 first (not writing-1: not a reference category), stored under the
    # documented key; the grades are made against its answers, never the question's own.
    judged = tmp_path / "judge"
    assert main([*common, "--reference-mode", "judge", "--out", str(judged)]) in (0, 1)
    capsys.readouterr()
    report = json.loads((judged / "report.json").read_text())
    assert report["reference_mode"] == "judge" and report["this_run"]["answer_turns_generated"] == 2  # math-1's cached
    answers = read_model_answers(judged / "answers" / "smol.jsonl", questions)
    key = _reference_key(report["judge_key"], math)
    store = SqliteStore(cache)
    stored = store.get_many([key, _reference_key(report["judge_key"], writing)])
    assert list(stored) == [key], stored
    written = tuple(stored[key]["turns"])
    assert len(written) == 2 and all(t.strip() for t in written) and written != math.references
    assert _graded(judged) == _expected_prompts(questions, answers, {"math-1": written})
    assert {g["item_id"]: (g["reference"], g["protocol"]) for g in _lines(judged / "grades.jsonl")} == {
        "math-1/t1": ("judge", "mt-bench-single-reference"), "math-1/t2": ("judge", "mt-bench-single-reference-multi"),
        "writing-1/t1": (None, "mt-bench-single"), "writing-1/t2": (None, "mt-bench-single-multi")}  # fmt: skip

    # A re-run (math-1 alone) reads the references from the cache: replaced there, the replacement is in
    # the prompts.
    store.put_many({key: {"turns": list(STORED)}})
    store.close()
    assert main([*common, "--reference-mode", "judge", "--limit", "1", "--out", str(judged)]) in (0, 1)
    capsys.readouterr()
    again = json.loads((judged / "report.json").read_text())
    assert _graded(judged) == _expected_prompts([math], answers[:1], {"math-1": STORED})
    assert again["this_run"]["answer_turns_generated"] == 0
    assert again["reference_mode"] == "judge" and SqliteStore(cache).get_many([key])[key] == {"turns": list(STORED)}


# -- hostile reference and question input: one line, exit 2, before any model loads -----------------------
@pytest.mark.parametrize(
    ("files", "extra", "message"),
    [
        ({}, ["--references", "{tmp}/missing.jsonl"], "missing.jsonl' does not exist"),
        ({"r.jsonl": ['{"question_id": "math-1", "choices": [{"turns": ["a", "b"]}]', ""]}, ["--references", "{tmp}/r.jsonl"],
         "r.jsonl: line 1 is not valid JSON"),
        ({"r.jsonl": ['{"question_id": "math-1", "choices": [{"turns": ["only one"]}]}']}, ["--references", "{tmp}/r.jsonl"],
         "r.jsonl: line 1: choices[0].turns: 1 reference answer(s) for 2 turn(s)"),
        ({"r.jsonl": ['{"question_id": "math-1", "choices": []}']}, ["--references", "{tmp}/r.jsonl"],
         "r.jsonl: line 1: choices must be a non-empty list whose first entry has turns"),
        ({"q.jsonl": ['{"question_id": "q1", "category": "math", "turns": []}']}, [], "q.jsonl: line 1: turns: 0 turns; a question has 1 or 2"),
        ({"q.jsonl": ['{"question_id": "q1", "category": "math", "turns": "What is 2+2?"}']}, [], "q.jsonl: line 1: turns: expected a list of 1 or 2 strings, got str"),
        ({"q.jsonl": ['{"category": "math", "turns": ["What is 2+2?"]}']}, [], "q.jsonl: line 1: missing field 'question_id'"),
        ({"q.jsonl": ['["q1", "What is 2+2?"]']}, [], "q.jsonl: line 1: expected an object with question_id and turns"),
        ({"q.jsonl": ['{"question_id": "q1", "category": "math", "turns": ["a", "b"], "reference": ["r"]}']}, [],
         "q.jsonl: line 1: reference: 1 reference answer(s) for 2 turn(s)"),
        ({}, ["--reference-mode", "JUDGE"], "--reference-mode must be one of given, judge, none, not 'JUDGE'"),
        ({}, ["--reference-mode", ""], "--reference-mode must be one of given, judge, none, not ''"),
    ],
)
def test_grade_hostile_references_and_questions_are_one_line(files, extra, message, tmp_path, capsys):
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    questions = str(tmp_path / "q.jsonl") if "q.jsonl" in files else _questions_file(tmp_path)
    args = [a.format(tmp=tmp_path) for a in extra]
    code = main(["judge", "grade", "--questions", questions, *args, "--answers-from", f"m=hf:path={tmp_path}/no-model",
                 "--judge", "hf", "--judge-args", f"path={tmp_path}/no-model", "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 2
    assert message in _error(capsys)
    assert not (tmp_path / "out").exists()
