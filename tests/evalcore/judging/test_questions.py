"""Questions for single-answer grading: what an admin types (questions_from_items), FastChat llm_judge's
question.jsonl and reference answer files (read_questions), the bundled sample, and the answer-set hash.
Every malformed input is refused with one ValueError naming the item (or line) and the problem."""

from __future__ import annotations

import json

import pytest

from evalcore.judging.questions import (
    MAX_LINE_BYTES,
    MAX_TEXT_CHARS,
    SAMPLE_QUESTIONS,
    JudgeQuestion,
    questions_from_items,
    questions_sha256,
    read_questions,
)


def write_jsonl(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def test_items_as_an_admin_types_them():
    questions = questions_from_items([
        "What is 2+2?",
        {"id": "q-two", "turns": ["Name a colour.", "Now another one."], "category": "writing"},
        {"text": "Solve x + 1 = 3.", "category": "math", "reference": "x = 2"},
        {"turns": ["A?", "B?"], "references": ["a", "b"]},
    ])  # fmt: skip
    assert questions == [
        JudgeQuestion("0", ("What is 2+2?",)),
        JudgeQuestion("q-two", ("Name a colour.", "Now another one."), "writing"),
        JudgeQuestion("2", ("Solve x + 1 = 3.",), "math", ("x = 2",)),
        JudgeQuestion("3", ("A?", "B?"), "", ("a", "b")),
    ]
    # Bidirectional and control characters are text like any other in a question (not in an id).
    assert questions_from_items(["abc \u202e cba \x07"])[0].turns == ("abc \u202e cba \x07",)
    assert questions_from_items([{"id": 81, "text": "x"}])[0].question_id == "81"  # FastChat's integer ids


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ({"turns": ["a"]}, "must be a JSON list"),
        ([], "the list is empty"),
        ([3], "item 0: expected a string or an object"),
        (["ok", None], "item 1: expected a string or an object"),
        (["  "], "item 0: the text is empty"),
        ([{"turns": ["a", " "]}], r"item 0: turns\[1\]: the text is empty"),
        ([{"turns": ["a", "b", "c"]}], "item 0: turns: 3 turns; a question has 1 or 2"),
        ([{"turns": []}], "item 0: turns: 0 turns"),
        ([{"turns": "a"}], "item 0: turns: expected a list"),
        ([{"turns": ["a", 2]}], r"item 0: turns\[1\]: expected a string, got int"),
        ([{"text": "a", "turns": ["a"]}], "item 0: give either turns"),
        ([{"category": "x"}], "item 0: give either turns"),
        ([{"text": "a", "colour": 1}], "item 0: unknown key 'colour'"),
        (["a", {"id": "1", "text": "b"}, {"id": "1", "text": "c"}], "item 2: duplicate id '1' \\(also used by item 1\\)"),
        (["a", {"id": "0", "text": "b"}], "item 1: duplicate id '0'"),
        ([{"id": True, "text": "a"}], "item 0: the id must be a string or an integer, got bool"),
        ([{"id": 1.5, "text": "a"}], "the id must be a string or an integer, got float"),
        ([{"id": "", "text": "a"}], "the id must have 1 to 200 characters"),
        ([{"id": "x" * 201, "text": "a"}], "the id must have 1 to 200 characters"),
        ([{"id": " q1", "text": "a"}], "leading or trailing whitespace"),
        ([{"id": "q\u202e1", "text": "a"}], "U\\+202E"),
        ([{"id": "q\n1", "text": "a"}], "U\\+000A"),
        ([{"id": "q\u200b1", "text": "a"}], "U\\+200B"),
        ([{"text": "a" * (MAX_TEXT_CHARS + 1)}], f"item 0: text: {MAX_TEXT_CHARS + 1} characters, more than"),
        ([{"text": "a\x00b"}], "NUL character"),
        ([{"text": "a", "category": 3}], "category must be a string"),
        ([{"text": "a", "category": "c\x1b[31m"}], "category must be at most 100 printable characters"),
        ([{"turns": ["a", "b"], "references": ["r"]}], "item 0: references: 1 reference answer\\(s\\) for 2 turn\\(s\\)"),
        ([{"turns": ["a", "b"], "reference": "r"}], "reference is one string for a one-turn question"),
        ([{"text": "a", "reference": "r", "references": ["r"]}], "not both"),
        ([{"text": "a", "references": "r"}], "references: expected a list of strings"),
        ([{"text": "a", "reference": ""}], "reference: the text is empty"),
    ],
)
def test_malformed_items_are_refused_naming_the_item(items, message):
    with pytest.raises(ValueError, match=message):
        questions_from_items(items)


def test_too_many_items():
    with pytest.raises(ValueError, match="at most 10000 questions"):
        questions_from_items(["q"] * 10_001)


def test_the_question_dataclass_checks_itself():
    with pytest.raises(ValueError, match="1 or 2 non-empty turns"):
        JudgeQuestion("q", ("a", "b", "c"))
    with pytest.raises(ValueError, match="1 reference"):
        JudgeQuestion("q", ("a", "b"), references=("r",))


def test_fastchat_question_file_with_its_reference_answer_file(tmp_path):
    questions = write_jsonl(tmp_path / "question.jsonl", [
        {"question_id": 81, "category": "writing", "turns": ["Write a blog post.", "Rewrite it."]},
        "",
        {"question_id": 111, "category": "math", "turns": ["Area?", "Circle?"], "reference": ["3", "pi"]},
        {"question_id": 119, "category": "math", "turns": ["Cost?", "Profit?"], "extra": "ignored"},
    ])  # fmt: skip
    read = read_questions(questions)
    assert [(q.question_id, q.category, q.references) for q in read] == [
        ("81", "writing", ()), ("111", "math", ("3", "pi")), ("119", "math", ())
    ]  # fmt: skip
    references = write_jsonl(tmp_path / "gpt-4.jsonl", [
        {"question_id": 119, "answer_id": "x", "model_id": "gpt-4", "choices": [{"index": 0, "turns": ["$280", "$100"]}]},
        {"question_id": 111, "choices": [{"turns": ["4", "2 pi"]}]},
        {"question_id": 999, "choices": [{"turns": ["not in the question file"]}]},
    ])  # fmt: skip
    read = read_questions(questions, references_path=references)
    assert [q.references for q in read] == [(), ("4", "2 pi"), ("$280", "$100")]  # the file's answers replace


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"question_id": 1, "turns": ["a"]}', "{not json"], "question.jsonl: line 2 is not valid JSON"),
        (['[1, 2]'], "line 1: expected an object with question_id and turns"),
        (['{"turns": ["a"]}'], "line 1: missing field 'question_id'"),
        (['{"question_id": 1}'], "line 1: missing field 'turns'"),
        (['{"question_id": 1, "turns": ["a", "b", "c"]}'], "line 1: turns: 3 turns"),
        (['{"question_id": 1, "turns": [""]}'], r"line 1: turns\[0\]: the text is empty"),
        (['{"question_id": null, "turns": ["a"]}'], "line 1: the id must be a string or an integer, got NoneType"),
        (['{"question_id": 1, "turns": ["a"], "reference": ["r", "s"]}'], "line 1: reference: 2 reference answer"),
        (['{"question_id": 1, "turns": ["a"]}', '{"question_id": "1", "turns": ["b"]}'],
         "question '1': duplicate id '1'"),
        (['{"question_id": 1, "turns": ["a"], "category": ' + "[" * 20 + "]" * 20 + "}"], "nests deeper than 8"),
        ([""], "holds no questions"),
    ],
)
def test_malformed_question_files_name_the_line(tmp_path, lines, message):
    path = write_jsonl(tmp_path / "question.jsonl", lines)
    with pytest.raises(ValueError, match=message):
        read_questions(path)


def test_huge_lines_bad_encoding_and_missing_files(tmp_path):
    path = tmp_path / "question.jsonl"
    path.write_bytes(b'{"question_id": 1, "turns": ["a"]}\n{"question_id": 2, "turns": ["' + b"a" * MAX_LINE_BYTES + b'"]}\n')
    with pytest.raises(ValueError, match="line 2 is longer than"):
        read_questions(path)
    path.write_bytes(b'{"question_id": 1, "turns": ["\xff"]}\n')
    with pytest.raises(ValueError, match="line 1 is not UTF-8"):
        read_questions(path)
    with pytest.raises(ValueError, match="does not exist"):
        read_questions(tmp_path / "nowhere.jsonl")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"question_id": 1}', "line 1: expected an object with question_id and choices"),
        ('{"question_id": 1, "choices": []}', "choices must be a non-empty list"),
        ('{"question_id": 1, "choices": [{"turns": ["only one"]}]}', r"choices\[0\]\.turns: 1 reference answer\(s\) for 2"),
        ('{"question_id": 1, "choices": [{"turns": ["a", 5]}]}', r"choices\[0\]\.turns\[1\]: expected a string"),
    ],
)
def test_malformed_reference_files_name_the_line(tmp_path, line, message):
    questions = write_jsonl(tmp_path / "question.jsonl", [{"question_id": 1, "turns": ["a", "b"]}])
    references = write_jsonl(tmp_path / "ref.jsonl", [line])
    with pytest.raises(ValueError, match=message):
        read_questions(questions, references_path=references)
    if "only one" in line:  # the same entry twice is refused too
        write_jsonl(references, ['{"question_id": 1, "choices": [{"turns": ["a", "b"]}]}'] * 2)
        with pytest.raises(ValueError, match="line 2: a second reference answer for question '1'"):
            read_questions(questions, references_path=references)


def test_the_bundled_sample_and_the_answer_set_hash():
    sample = read_questions(SAMPLE_QUESTIONS)
    assert len(sample) == 8 and all(len(q.turns) == 2 for q in sample)
    assert {q.category for q in sample} == {
        "writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"
    }  # fmt: skip
    assert {q.category for q in sample if q.references} == {"math", "reasoning", "coding"}
    digest = questions_sha256(sample, 512)
    assert len(digest) == 64 and digest == questions_sha256(list(sample), 512) != questions_sha256(sample, 256)
    # References and categories change the grading, not the answers: the same answer set.
    stripped = [JudgeQuestion(q.question_id, q.turns) for q in sample]
    assert questions_sha256(stripped, 512) == digest
    changed = [*sample[:-1], JudgeQuestion(sample[-1].question_id, (sample[-1].turns[0], "Another question."))]
    assert questions_sha256(changed, 512) != digest
    assert questions_sha256(sample[::-1], 512) != digest
