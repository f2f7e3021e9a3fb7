"""Pre-generated answers in FastChat llm_judge's ``model_answer/<model>.jsonl`` format.

One JSON object a line: ``question_id``, ``choices`` (a list whose first entry holds ``turns``, one
answer per turn of the question), and fields FastChat adds (``answer_id``, ``model_id``, ``tstamp``),
which are ignored::

    {"question_id": 81, "model_id": "m", "choices": [{"index": 0, "turns": ["turn 1 answer", "turn 2 answer"]}]}

:func:`read_model_answers` is a hostile-input boundary: the file and each line are bounded, and an
answer missing for a question, an answer with the wrong number of turns, a duplicate question or a
malformed line is refused with one ValueError naming the file, the line or question, and the problem.
Entries for questions not asked are ignored (a file for all of MT-Bench serves a run on some of it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from evalcore.boundary import boundedjson
from evalcore.judging.questions import JudgeQuestion

MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_ANSWER_CHARS = 200_000


def read_model_answers(path: str | Path, questions: Sequence[JudgeQuestion]) -> list[tuple[str, ...]]:
    """The answers in ``path`` to each of ``questions``, one string per turn, in the questions' order."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"answers file {str(path)!r} does not exist")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"answers file {str(path)!r} is larger than {MAX_FILE_BYTES} bytes")
    wanted = {q.question_id: q for q in questions}
    found: dict[str, tuple[str, ...]] = {}
    seen: dict[str, int] = {}
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = f"{path.name}: line {lineno}"
            if len(raw) > MAX_LINE_BYTES:
                raise ValueError(f"{where} is longer than {MAX_LINE_BYTES} bytes")
            if not raw.strip():
                continue
            record = boundedjson.loads(raw, name=where, max_depth=8)
            question_id = _question_id(record, where)
            if question_id in seen:
                raise ValueError(f"{where}: a second answer to question {question_id!r} (first on line {seen[question_id]})")
            seen[question_id] = lineno
            if question_id in wanted:
                found[question_id] = _turns(record, wanted[question_id], where)
    missing = [q.question_id for q in questions if q.question_id not in found]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise ValueError(f"answers file {path.name}: no answer to question {missing[0]!r}{more}")
    return [found[q.question_id] for q in questions]


def _question_id(record, where: str) -> str:
    if not isinstance(record, dict) or "question_id" not in record or "choices" not in record:
        raise ValueError(f"{where}: expected an object with question_id and choices (FastChat's model_answer format)")
    value = record["question_id"]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: question_id must be a non-empty string or an integer")
    return value


def _turns(record: dict, question: JudgeQuestion, where: str) -> tuple[str, ...]:
    choices = record["choices"]
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict) or "turns" not in choices[0]:
        raise ValueError(f"{where}: choices must be a non-empty list whose first entry has turns")
    turns = choices[0]["turns"]
    if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
        raise ValueError(f"{where}: choices[0].turns must be a list of strings")
    if len(turns) != len(question.turns):
        raise ValueError(f"{where}: {len(turns)} answer turn(s) for question {question.question_id!r}, "
                         f"which has {len(question.turns)} turn(s)")  # fmt: skip
    for i, text in enumerate(turns):
        if len(text) > MAX_ANSWER_CHARS:
            raise ValueError(f"{where}: choices[0].turns[{i}] has {len(text)} characters, more than {MAX_ANSWER_CHARS}")
    return tuple(turns)


def model_answer_rows(model: str, questions: Sequence[JudgeQuestion], answers: Sequence[Sequence[str]]) -> list[dict]:
    """Rows of a ``model_answer`` file (readable by :func:`read_model_answers` and by FastChat)."""
    return [{"question_id": q.question_id, "model_id": model, "choices": [{"index": 0, "turns": list(turns)}]}
            for q, turns in zip(questions, answers)]  # fmt: skip


def question_set_sha256(questions: Sequence[JudgeQuestion]) -> str:
    """What identifies a question set for comparing runs: every question's id and turns, in order."""
    payload = json.dumps([[q.question_id, list(q.turns)] for q in questions], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def answers_sha256(questions: Sequence[JudgeQuestion], answers: Sequence[Sequence[str]]) -> str:
    """What identifies one model's answers to a question set (two runs graded the same answers)."""
    payload = json.dumps([[q.question_id, list(t)] for q, t in zip(questions, answers)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
