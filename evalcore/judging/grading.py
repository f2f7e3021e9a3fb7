"""Single-answer grading (MT-Bench's 1-10 scale): a ``kind: single`` protocol scores each answer alone.

::

    protocol = load_protocol("mt-bench-single")
    grades = grade_answers(judge, protocol, [GradeItem("q1", "What is 2+2?", "4")])

Grades are cached like judgments (same key: judge, protocol hash, prompt sha256). An answer whose
score is missing or out of range is a failed grade, never a default score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from evalcore.judging.cache import JudgmentCache
from evalcore.judging.judge import generate_texts, parse_score, prompt_sha256
from evalcore.judging.protocol import JudgeProtocol
from evalcore.models.base import Backend


@dataclass(frozen=True)
class GradeItem:
    """One answer to grade."""

    item_id: int | str
    question: str
    answer: str
    reference: str | None = None


@dataclass(frozen=True)
class Grade:
    """A graded answer: ``score`` in the protocol's range when ``status == "ok"``, else ``error``."""

    item_id: int | str
    prompt_sha256: str
    status: str
    score: float | None = None
    raw: str | None = None
    error: str | None = None
    cached: bool = False

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def grade_answers(backend: Backend, protocol: JudgeProtocol, items: Sequence[GradeItem], *,
                  cache: JudgmentCache | None = None) -> list[Grade]:
    """Grade every item with a single-answer protocol; one Grade per item, in order."""
    if protocol.kind != "single":
        raise ValueError(f"protocol {protocol.name!r} compares pairs; grade_answers needs a single-answer protocol")
    for index, item in enumerate(items):
        if not item.answer.strip():
            raise ValueError(f"item {item.item_id} (index {index}): the answer is empty")
    conversations = [protocol.messages(question=i.question, answer=i.answer, reference=i.reference) for i in items]
    shas = [prompt_sha256(c, None) for c in conversations]
    found = cache.lookup(shas) if cache is not None else {}
    todo = [i for i, sha in enumerate(shas) if sha not in found]
    texts = generate_texts(backend, [conversations[i] for i in todo], max_new_tokens=protocol.verdict.max_new_tokens)
    fresh: dict[int, Grade] = {}
    for i, text in zip(todo, texts):
        item, sha = items[i], shas[i]
        if isinstance(text, BaseException):
            fresh[i] = Grade(item.item_id, sha, "failed", error=" ".join(str(text).split())[:500] or type(text).__name__)
            continue
        try:
            fresh[i] = Grade(item.item_id, sha, "ok", score=parse_score(protocol, text), raw=text)
        except ValueError as exc:
            fresh[i] = Grade(item.item_id, sha, "failed", raw=text, error=str(exc))
    if cache is not None:
        cache.save_fields({g.prompt_sha256: {"score": g.score, "raw": g.raw} for g in fresh.values() if g.status == "ok"})
    return [
        fresh[i] if i in fresh else Grade(items[i].item_id, shas[i], "ok", cached=True, **found[shas[i]])
        for i in range(len(items))
    ]
