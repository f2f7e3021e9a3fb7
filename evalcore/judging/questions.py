"""Questions for single-answer grading: one or two user turns each (MT-Bench's format), with optional
reference answers.

::

    questions = read_questions("question.jsonl", references_path="reference_answer/gpt-4.jsonl")
    questions = questions_from_items(["What is 2+2?", {"id": "q2", "turns": ["Hi", "Now in French"]}])

``read_questions`` reads FastChat llm_judge's ``question.jsonl`` (one JSON object a line:
``question_id``, ``category``, ``turns``, optionally ``reference``) and, optionally, its reference
answer file (``reference_answer/gpt-4.jsonl``: ``question_id`` and ``choices[0]["turns"]``).
``questions_from_items`` reads what an admin types into a JSON field. Both are hostile-input
boundaries: every size is bounded and a malformed item is refused with one ValueError naming the item
(index, and line for files) and the problem.

Texts (turns, references) are kept as written, control and bidirectional characters included, except
NUL (which PostgreSQL text columns refuse). Question ids are labels shown on pages and used in grade
ids (``"{question_id}/t{turn}"``): 1 to 200 characters, no control, format (bidi overrides,
zero-width) or line/paragraph separator characters, no surrounding whitespace. An integer id (FastChat
numbers its questions) is read as its decimal string.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evalcore.boundary import boundedjson

SAMPLE_QUESTIONS = Path(__file__).resolve().parent / "data" / "sample-questions.jsonl"
MAX_TURNS = 2
MAX_QUESTIONS = 10_000
MAX_TEXT_CHARS = 20_000  # one turn or one reference answer
MAX_ID_CHARS = 200
MAX_CATEGORY_CHARS = 100
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
ITEM_KEYS = {"id", "turns", "text", "category", "reference", "references"}


@dataclass(frozen=True)
class JudgeQuestion:
    """A question to answer and grade: 1 or 2 user turns (each non-empty) and, optionally, a
    reference answer per turn (``references`` is empty or as long as ``turns``)."""

    question_id: str
    turns: tuple[str, ...]
    category: str = ""
    references: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= len(self.turns) <= MAX_TURNS or not all(isinstance(t, str) and t.strip() for t in self.turns):
            raise ValueError(f"question {self.question_id!r}: 1 or 2 non-empty turns are needed")
        if self.references and len(self.references) != len(self.turns):
            raise ValueError(
                f"question {self.question_id!r}: {len(self.references)} reference(s) for {len(self.turns)} turn(s)"
            )


def questions_from_items(items: list) -> list[JudgeQuestion]:
    """Questions from a JSON list as an admin types it.

    Each item is a plain string (one turn; its id is its index, as a string) or an object
    ``{"id"?, "turns": [..] | "text": "..", "category"?, "reference"?: str | "references"?: [..]}``
    (``reference``, one string, serves a one-turn question). Raises ValueError naming the item index
    and the problem.
    """
    if not isinstance(items, list):
        raise ValueError(f"questions must be a JSON list, got {type(items).__name__}")
    if not items:
        raise ValueError("questions: the list is empty")
    if len(items) > MAX_QUESTIONS:
        raise ValueError(f"questions: at most {MAX_QUESTIONS} questions, got {len(items)}")
    out = [_from_item(index, item) for index, item in enumerate(items)]
    _check_unique(out, [f"item {i}" for i in range(len(out))])
    return out


def _from_item(index: int, item) -> JudgeQuestion:
    where = f"item {index}"
    if isinstance(item, str):
        return JudgeQuestion(str(index), (_text(item, f"{where}"),))
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected a string or an object with turns or text, got {type(item).__name__}")
    _only_keys(item, ITEM_KEYS, where)
    if ("turns" in item) == ("text" in item):
        raise ValueError(f"{where}: give either turns (a list of 1 or 2 strings) or text (one string)")
    turns = _turns(item["turns"], f"{where}: turns") if "turns" in item else (_text(item["text"], f"{where}: text"),)
    question_id = _question_id(item["id"], where) if "id" in item else str(index)
    if "reference" in item and "references" in item:
        raise ValueError(f"{where}: give reference (one string) or references (a list), not both")
    if "reference" in item:
        if len(turns) != 1:
            raise ValueError(f"{where}: reference is one string for a one-turn question; use references")
        references: tuple[str, ...] = (_text(item["reference"], f"{where}: reference"),)
    else:
        references = _references(item.get("references"), len(turns), f"{where}: references")
    return JudgeQuestion(question_id, turns, _category(item.get("category"), where), references)


def read_questions(path: str | Path, *, references_path: str | Path | None = None) -> list[JudgeQuestion]:
    """Questions from FastChat llm_judge's ``question.jsonl``, optionally completed by a reference
    answer file in its ``reference_answer/*.jsonl`` format.

    A reference answer file's entry (``{"question_id", "choices": [{"turns": [...]}]}``) gives the
    references of the question with that id (replacing a ``reference`` field in the question file);
    entries for questions not in the file are ignored (the published file covers only some
    categories), and so are fields other than those named (variants of the format add their own).
    Raises ValueError naming the file, line and problem: a file too large, a line too
    long or not JSON, a missing or wrongly typed field, a duplicate id, references that do not match
    the turns.
    """
    questions = []
    for lineno, record in _jsonl(path, "questions file"):
        where = f"{Path(path).name}: line {lineno}"
        if not isinstance(record, dict):
            raise ValueError(f"{where}: expected an object with question_id and turns")
        for key in ("question_id", "turns"):
            if key not in record:
                raise ValueError(f"{where}: missing field {key!r}")
        turns = _turns(record["turns"], f"{where}: turns")
        references = _references(record.get("reference"), len(turns), f"{where}: reference")
        questions.append(JudgeQuestion(_question_id(record["question_id"], where), turns,
                                       _category(record.get("category"), where), references))  # fmt: skip
        if len(questions) > MAX_QUESTIONS:
            raise ValueError(f"{where}: more than {MAX_QUESTIONS} questions")
    if not questions:
        raise ValueError(f"questions file {str(path)!r} holds no questions")
    _check_unique(questions, [f"{Path(path).name}: question {q.question_id!r}" for q in questions])
    if references_path is not None:
        questions = _with_references(questions, references_path)
    return questions


def _with_references(questions: list[JudgeQuestion], path: str | Path) -> list[JudgeQuestion]:
    by_id = {q.question_id: i for i, q in enumerate(questions)}
    found: dict[str, tuple[str, ...]] = {}
    for lineno, record in _jsonl(path, "reference answer file"):
        where = f"{Path(path).name}: line {lineno}"
        if not isinstance(record, dict) or "question_id" not in record or "choices" not in record:
            raise ValueError(f"{where}: expected an object with question_id and choices")
        question_id = _question_id(record["question_id"], where)
        choices = record["choices"]
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict) \
                or "turns" not in choices[0]:
            raise ValueError(f"{where}: choices must be a non-empty list whose first entry has turns")
        if question_id in found:
            raise ValueError(f"{where}: a second reference answer for question {question_id!r}")
        if question_id not in by_id:
            found[question_id] = ()
            continue
        question = questions[by_id[question_id]]
        found[question_id] = _references(choices[0]["turns"], len(question.turns), f"{where}: choices[0].turns")
    out = list(questions)
    for question_id, references in found.items():
        if references:
            i = by_id[question_id]
            out[i] = JudgeQuestion(out[i].question_id, out[i].turns, out[i].category, references)
    return out


def questions_sha256(questions: Sequence[JudgeQuestion], max_new_tokens: int) -> str:
    """What keys stored answers: every question's id and turns, in order, and the answer length.
    Categories and references are left out (they change the grading, not the answers)."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise ValueError(f"max_new_tokens must be an integer, got {max_new_tokens!r}")
    payload = {"questions": [[q.question_id, list(q.turns)] for q in questions], "max_new_tokens": max_new_tokens}
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


# -- checks ------------------------------------------------------------------------------------------
def _jsonl(path: str | Path, what: str):
    """(line number, parsed object) of every non-blank line of a bounded UTF-8 JSONL file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} {str(path)!r} does not exist")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{what} {str(path)!r} is larger than {MAX_FILE_BYTES} bytes")
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise ValueError(f"{path.name}: line {lineno} is longer than {MAX_LINE_BYTES} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{path.name}: line {lineno} is not UTF-8 ({exc.reason})") from None
            if line.strip():
                yield lineno, boundedjson.loads(line, name=f"{path.name}: line {lineno}", max_depth=8)


def _only_keys(record: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in record if k not in allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0][:50]!r}; allowed: {', '.join(sorted(allowed))}")


def _text(value, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{where}: the text is empty")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"{where}: {len(value)} characters, more than {MAX_TEXT_CHARS}")
    if "\x00" in value:
        raise ValueError(f"{where}: the text contains a NUL character")
    return value


def _turns(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list of 1 or 2 strings, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_TURNS:
        raise ValueError(f"{where}: {len(value)} turns; a question has 1 or 2")
    return tuple(_text(text, f"{where}[{i}]") for i, text in enumerate(value))


def _references(value, n_turns: int, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list of strings (one per turn), got {type(value).__name__}")
    if len(value) != n_turns:
        raise ValueError(f"{where}: {len(value)} reference answer(s) for {n_turns} turn(s)")
    return tuple(_text(text, f"{where}[{i}]") for i, text in enumerate(value))


def _question_id(value, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if not -(10**18) < value < 10**18:
            raise ValueError(f"{where}: the id is an integer with more than 18 digits")
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"{where}: the id must be a string or an integer, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_ID_CHARS:
        raise ValueError(f"{where}: the id must have 1 to {MAX_ID_CHARS} characters")
    if value != value.strip():
        raise ValueError(f"{where}: the id {value[:50]!r} has leading or trailing whitespace")
    for char in value:
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            raise ValueError(f"{where}: the id {value[:50]!r} contains the invisible or control character "
                             f"U+{ord(char):04X}")  # fmt: skip
    return value


def _category(value, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: category must be a string, got {type(value).__name__}")
    if len(value) > MAX_CATEGORY_CHARS or any(unicodedata.category(c)[0] == "C" for c in value):
        raise ValueError(f"{where}: category must be at most {MAX_CATEGORY_CHARS} printable characters")
    return value.strip()


def _check_unique(questions: list[JudgeQuestion], wheres: list[str]) -> None:
    seen: dict[str, int] = {}
    for i, question in enumerate(questions):
        if question.question_id in seen:
            raise ValueError(f"{wheres[i]}: duplicate id {question.question_id!r} (also used by "
                             f"{wheres[seen[question.question_id]]})")  # fmt: skip
        seen[question.question_id] = i
