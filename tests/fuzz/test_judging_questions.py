"""Questions for single-answer grading (an admin's JSON list, FastChat question.jsonl and reference answer
files): a list of questions or a ValueError naming the problem, for any value, text or bytes."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from evalcore.judging.questions import questions_from_items, read_questions
from tests.fuzz.strategies import documented, json_values, scalars

KEYS = st.sampled_from(["id", "turns", "text", "category", "reference", "references", "question_id", "choices",
                        "colour"])  # fmt: skip
VALUE = scalars | st.integers(min_value=-(10**40), max_value=10**40) | json_values(KEYS)
ITEM = st.dictionaries(KEYS, VALUE | st.lists(st.text(max_size=6) | scalars, max_size=3), max_size=5) | VALUE


@given(st.lists(ITEM, max_size=4) | VALUE)
@example([{"id": 10**40, "text": "a"}])
@example([{"turns": ["a", "b"], "references": ["r", None]}])
@example(["a", {"id": "0", "text": "b"}])
def test_items(items):
    documented(lambda: questions_from_items(items))


LINE = st.fixed_dictionaries(
    {"question_id": st.integers(-3, 3) | scalars, "turns": st.lists(st.text(max_size=4) | scalars, max_size=3)},
    optional={"category": scalars, "reference": st.lists(st.text(max_size=4) | scalars, max_size=3) | scalars},
)
REFERENCE = st.fixed_dictionaries(
    {"question_id": st.integers(-3, 3) | scalars, "choices": st.lists(json_values(KEYS), max_size=2)
     | st.just([{"turns": ["x", "y"]}])},
)  # fmt: skip


def lines(strategy) -> st.SearchStrategy[bytes]:
    return st.lists(strategy | json_values(KEYS), max_size=4).map(lambda v: "\n".join(json.dumps(x) for x in v).encode())


@given(lines(LINE) | st.binary(max_size=60), lines(REFERENCE) | st.binary(max_size=40) | st.none())
@example(b'{"question_id": 1, "turns": ["a"]}\n' + b"[" * 100_000, None)
@example(b'{"question_id": 1, "turns": ["a", "b"]}', b'{"question_id": 1, "choices": [{"turns": ["a"]}]}')
def test_question_files(tmp_path_factory, questions, references):
    folder = tmp_path_factory.mktemp("questions")
    (folder / "question.jsonl").write_bytes(questions)
    refs = None
    if references is not None:
        refs = folder / "reference.jsonl"
        refs.write_bytes(references)
    documented(lambda: read_questions(folder / "question.jsonl", references_path=refs))
