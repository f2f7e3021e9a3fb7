"""Single-answer grading (MT-Bench's 1-10 scale): a ``kind: single`` protocol scores each answer alone.

::

    protocol = load_protocol("mt-bench-single")
    grades = grade_answers(judge, protocol, [GradeItem("q1", "What is 2+2?", "4")])

Two-turn questions (MT-Bench's format, :mod:`evalcore.judging.questions`) are graded per turn with a
protocol family (:class:`GradingProtocols`: plain and reference-guided, turn 1 alone and turn 2 in
context)::

    family = load_grading_protocols("mt-bench")
    references = judge_references(judge, questions, max_new_tokens=1024, cache=cache)   # optional
    grades = grade_conversations(judge, family, questions, answers, references=references, cache=cache)

Grades are cached like judgments (same key: judge, protocol hash, prompt sha256). An answer whose
score is missing or out of range is a failed grade, never a default score.

A protocol whose verdict is ``method: logprob`` with a ``scale`` is graded without generating text
(G-Eval's probability-weighted score): the prompt is the judge's chat template with the generation
prompt, then the verdict ``prefix``; each rating's whole continuation (rating and ``suffix``,
``"10]]"``) is scored with :meth:`~evalcore.models.base.Backend.loglikelihood`, so a rating of several
tokens (``1`` then ``0``) gets the product of its tokens' probabilities, and no rating's probability
counts another's (``"1]]"`` is not a prefix of ``"10]]"``, which reading only the first token would
confuse). The probabilities are normalised over the scale; the grade is the expected rating. The
Grade records the normalised ``probabilities`` (scale order), ``mass`` (the unnormalised probability
that the judge continues with any rating of the scale: a small mass says the judge barely meant to
rate at all) and ``entropy`` (of the normalised distribution, divided by ``log(len(scale))``: 1 is
uniform, where the expected rating is the scale's middle whatever the answer).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from evalcore.judging.answering import answer_questions
from evalcore.judging.cache import JudgmentCache
from evalcore.judging.judge import (  # REFERENCE_CATEGORIES: MT-Bench's reference-guided categories
    REFERENCE_CATEGORIES,
    cache_for,
    generate_texts,
    judge_key,
    parse_score,
    prompt_sha256,
)
from evalcore.judging.protocol import JudgeProtocol, check_family, load_protocol
from evalcore.judging.questions import JudgeQuestion
from evalcore.models.base import Backend, LoglikelihoodRequest

# Bundled protocol families: single, single_multi, reference, reference_multi (file stems).
FAMILIES = {
    "mt-bench": ("mt-bench-single", "mt-bench-single-multi", "mt-bench-single-reference",
                 "mt-bench-single-reference-multi"),
    # The same prompts asking for the rating alone, graded by the ratings' probabilities (expected score).
    "mt-bench-logprob": ("mt-bench-single-logprob", "mt-bench-single-multi-logprob",
                         "mt-bench-single-reference-logprob", "mt-bench-single-reference-multi-logprob"),
}  # fmt: skip
MAX_ERROR_CHARS = 500


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
    protocol: str | None = None  # grade_conversations: the protocol's name ...
    protocol_sha256: str | None = None  # ... and hash
    reference: bool | None = None  # grade_conversations: graded against a reference answer
    probabilities: tuple[float, ...] | None = None  # log-prob grades: P(rating), normalised over the scale
    mass: float | None = None  # ... the probability the judge gave the scale's continuations together
    entropy: float | None = None  # ... of ``probabilities``, over log(len(scale)): 0 certain, 1 uniform

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
    slots = [
        _Slot(i.item_id, protocol, protocol.messages(question=i.question, answer=i.answer, reference=i.reference), cache)
        for i in items
    ]  # fmt: skip
    return _grade_slots(backend, slots)


@dataclass(frozen=True)
class _Slot:
    """One prompt to grade: its id, protocol, judge conversation, cache and extra Grade fields."""

    item_id: int | str
    protocol: JudgeProtocol
    messages: list
    cache: JudgmentCache | None
    extra: tuple = ()


CACHED_FIELDS = ("score", "raw", "probabilities", "mass", "entropy")


def _grade_slots(backend: Backend, slots: Sequence[_Slot]) -> list[Grade]:
    """Grade every slot (cached ones read back), generating the rest in one batch per answer length
    (log-prob protocols: scoring every rating's continuation in one loglikelihood call)."""
    shas = [prompt_sha256(s.messages, s.protocol.verdict.prefix or None) for s in slots]
    found: dict[int, dict] = {}
    by_cache: dict[int, list[int]] = {}
    for i, slot in enumerate(slots):
        if slot.cache is not None:
            by_cache.setdefault(id(slot.cache), []).append(i)
    for indices in by_cache.values():
        hits = slots[indices[0]].cache.lookup(shas[i] for i in indices)
        found.update({i: hits[shas[i]] for i in indices if shas[i] in hits})
    todo = [i for i in range(len(slots)) if i not in found]
    scored = [i for i in todo if slots[i].protocol.verdict.graded_by_logprob]
    fresh: dict[int, Grade] = _logprob_grades(backend, slots, shas, scored) if scored else {}
    by_length: dict[int, list[int]] = {}
    for i in todo:
        if i not in fresh:
            by_length.setdefault(slots[i].protocol.verdict.max_new_tokens, []).append(i)
    for max_new_tokens, indices in by_length.items():
        texts = generate_texts(backend, [slots[i].messages for i in indices], max_new_tokens=max_new_tokens)
        for i, text in zip(indices, texts):
            fresh[i] = _graded(slots[i], shas[i], text)
    to_save: dict[int, dict[str, dict]] = {}
    for i, grade in fresh.items():
        if grade.status == "ok" and slots[i].cache is not None:
            fields = {k: getattr(grade, k) for k in CACHED_FIELDS if getattr(grade, k) is not None}
            to_save.setdefault(id(slots[i].cache), {})[grade.prompt_sha256] = {
                k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    caches = {id(s.cache): s.cache for s in slots if s.cache is not None}
    for key, fields in to_save.items():
        caches[key].save_fields(fields)
    out = []
    for i, slot in enumerate(slots):
        if i in fresh:
            out.append(fresh[i])
        else:
            stored = {k: found[i].get(k) for k in CACHED_FIELDS}
            if stored["probabilities"] is not None:
                stored["probabilities"] = tuple(stored["probabilities"])
            out.append(Grade(slot.item_id, shas[i], "ok", cached=True, **stored, **dict(slot.extra)))
    return out


def _graded(slot: _Slot, sha: str, text: str | BaseException) -> Grade:
    extra = dict(slot.extra)
    if isinstance(text, BaseException):
        error = " ".join(str(text).split())[:MAX_ERROR_CHARS] or type(text).__name__
        return Grade(slot.item_id, sha, "failed", error=error, **extra)
    try:
        return Grade(slot.item_id, sha, "ok", score=parse_score(slot.protocol, text), raw=text, **extra)
    except ValueError as exc:
        return Grade(slot.item_id, sha, "failed", raw=text, error=str(exc), **extra)


def _logprob_grades(backend: Backend, slots: Sequence[_Slot], shas: Sequence[str],
                    indices: Sequence[int]) -> dict[int, Grade]:  # fmt: skip
    """Grades of the log-prob slots ``indices``: every rating's continuation scored in one call."""
    if getattr(backend, "sends_messages", False):
        raise ValueError(_needs_scoring(slots[indices[0]].protocol, backend))
    out: dict[int, Grade] = {}
    requests, owners = [], []
    encode, window = getattr(backend, "tok_encode", None), getattr(backend, "max_length", None)
    for i in indices:
        verdict = slots[i].protocol.verdict
        try:
            context = backend.chat_context(slots[i].messages) + verdict.prefix
        except ValueError:
            raise ValueError(_needs_scoring(slots[i].protocol, backend)) from None
        if callable(encode) and window:
            longest = max(len(encode(context + c)) for c in verdict.continuations)
            if longest > window:
                out[i] = Grade(slots[i].item_id, shas[i], "failed", **dict(slots[i].extra), error=(
                    f"the judge prompt and a rating have {longest} tokens, more than the judge's window ({window})"))
                continue
        requests.extend(LoglikelihoodRequest(context, c) for c in verdict.continuations)
        owners.append(i)
    if not owners:
        return out
    try:
        results = backend.loglikelihood(requests)
        logprobs = [r.logprob for r in results]
    except Exception as exc:  # noqa: BLE001 - recorded per grade, never a crash
        error = " ".join(str(exc).split())[:MAX_ERROR_CHARS] or type(exc).__name__
        return {**out, **{i: Grade(slots[i].item_id, shas[i], "failed", error=error, **dict(slots[i].extra))
                          for i in owners}}  # fmt: skip
    start = 0
    for i in owners:
        scale = slots[i].protocol.verdict.scale
        out[i] = expected_grade(slots[i].item_id, shas[i], scale, logprobs[start : start + len(scale)],
                                extra=dict(slots[i].extra))  # fmt: skip
        start += len(scale)
    return out


def _needs_scoring(protocol: JudgeProtocol, backend: Backend) -> str:
    return (f"the log-prob grading protocol {protocol.name!r} scores each rating after the judge's chat template: "
            f"it needs a backend that renders the template and scores continuations (hf, vllm), not "
            f"{getattr(backend, 'name', type(backend).__name__)!r}; or use a protocol that parses a generated "
            "rating")  # fmt: skip


def expected_grade(item_id, sha: str, scale: Sequence[float], logprobs: Sequence[float], *,
                   extra: dict | None = None) -> Grade:  # fmt: skip
    """The log-prob Grade of one prompt from its ratings' continuation log-likelihoods.

    Parameters
    ----------
    scale : sequence of float, length k
    logprobs : sequence of float, length k
        ``log P(rating continuation | prompt + prefix)`` for each rating.

    Returns
    -------
    Grade
        ``score = sum(p * scale)`` with ``p = softmax(logprobs)``; ``probabilities = p``, ``mass =
        sum(exp(logprobs))``, ``entropy = H(p) / log(k)``. Failed when a log-probability is NaN or
        positive, or every rating has probability zero.
    """
    extra = extra or {}
    values = [float(v) for v in logprobs]
    if len(values) != len(scale) or any(math.isnan(v) or v > 1e-3 for v in values) or max(values) == -math.inf:
        return Grade(item_id, sha, "failed", error=f"the judge reported impossible rating log-probabilities: {values}",
                     **extra)  # fmt: skip
    top = max(values)
    weights = [math.exp(v - top) for v in values]
    total = sum(weights)
    probabilities = tuple(w / total for w in weights)
    score = sum(p * float(r) for p, r in zip(probabilities, scale))
    score = min(max(score, float(min(scale))), float(max(scale)))  # rounding never leaves the scale
    mass = min(1.0, math.exp(top) * total)
    entropy = -sum(p * math.log(p) for p in probabilities if p > 0) / math.log(len(scale))
    raw = f"log-prob grade: expected rating {score:.4f}, mass on the scale {mass:.3g}, entropy {entropy:.3f}"
    return Grade(item_id, sha, "ok", score=score, raw=raw, probabilities=probabilities, mass=mass,
                 entropy=min(1.0, max(0.0, entropy)), **extra)


# -- conversations: one grade per turn ----------------------------------------------------------------
@dataclass(frozen=True)
class GradingProtocols:
    """A family of single-answer protocols: ``single`` grades turn 1, ``single_multi`` turn 2 in
    context; ``reference`` and ``reference_multi`` do the same against reference answers, for
    questions whose category is in ``reference_categories`` (compared case-insensitively) and that
    have a reference. A missing member falls back to the plain one (a family without
    ``single_multi`` grades one-turn questions only)."""

    single: JudgeProtocol
    single_multi: JudgeProtocol | None = None
    reference: JudgeProtocol | None = None
    reference_multi: JudgeProtocol | None = None
    reference_categories: tuple[str, ...] = REFERENCE_CATEGORIES

    def __post_init__(self) -> None:
        # A lone reference-guided protocol (with its two-turn companion) grades every question against its
        # reference: then ``single`` and ``single_multi`` are reference-guided and no reference member is given.
        lone = isinstance(self.single, JudgeProtocol) and self.single.uses_reference
        if lone and (self.reference is not None or self.reference_multi is not None):
            raise ValueError("single: a family with reference members needs a single protocol without a reference")
        roles = (("single", 1, lone), ("single_multi", 2, lone), ("reference", 1, True), ("reference_multi", 2, True))
        check_family(self, roles, kind="single", what="grading", missing="a grading family needs its single protocol",
                     verb="grades")  # fmt: skip

    @property
    def sha256(self) -> str:
        """Over the four protocols' hashes (None for a missing one) and the reference categories."""
        members = [getattr(self, r) for r in ("single", "single_multi", "reference", "reference_multi")]
        content = {"protocols": [p.sha256 if p is not None else None for p in members],
                   "reference_categories": sorted(c.strip().lower() for c in self.reference_categories)}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    @property
    def all_guided(self) -> bool:
        """Every question is graded against its reference (a lone reference-guided protocol)."""
        return self.single.uses_reference

    def guided(self, category: str) -> bool:
        """Whether a question of ``category`` is graded against its reference (when it has one)."""
        if self.all_guided:
            return True
        return category.strip().lower() in {c.strip().lower() for c in self.reference_categories}


def grade_bounds(family: GradingProtocols) -> tuple[float, float] | None:
    """The scale a family grades on (its members' lowest minimum and highest maximum: 1-10 for
    MT-Bench's), to clip intervals to; None when a member keeps any number the judge writes
    (FastChat's rule has no range check)."""
    members = [p for p in (family.single, family.single_multi, family.reference, family.reference_multi) if p is not None]
    if any(p.verdict.fastchat for p in members):
        return None
    return min(p.verdict.score_min for p in members), max(p.verdict.score_max for p in members)


def load_grading_protocols(name: str | Path = "mt-bench") -> GradingProtocols:
    """A bundled family by name (``mt-bench``: ``mt-bench-single``, ``-single-multi``,
    ``-single-reference``, ``-single-reference-multi``), or one single-answer protocol (a bundled
    name or a YAML file) as a family of one."""
    if str(name) in FAMILIES:
        single, multi, reference, reference_multi = (load_protocol(n) for n in FAMILIES[str(name)])
        return GradingProtocols(single, multi, reference, reference_multi)
    return family_of_one(load_protocol(name), str(name))


def family_of_one(protocol: JudgeProtocol, name: str) -> GradingProtocols:
    """One one-turn single-answer protocol as a family (a reference-guided one grades every question
    against its reference); ValueError for any other protocol."""
    if protocol.kind != "single" or protocol.turns != 1:
        raise ValueError(f"{name!r} is neither a grading family ({', '.join(FAMILIES)}) nor a one-turn single-answer "
                         "protocol")  # fmt: skip
    return GradingProtocols(single=protocol)


def grade_conversations(
    judge: Backend,
    protocols: GradingProtocols,
    questions: Sequence[JudgeQuestion],
    answers: Sequence[Sequence[str]],
    *,
    references: dict[str, Sequence[str]] | None = None,
    cache: JudgmentCache | None = None,
) -> list[Grade]:
    """Grade the answer to every turn of every question.

    Parameters
    ----------
    judge : Backend
    protocols : GradingProtocols
        Turn 1 is graded alone, turn 2 in context (the judge sees the first question and answer,
        then grades the answer to the second question).
    questions : sequence of JudgeQuestion, length n
    answers : sequence of tuples of str, length n
        ``answers[i][t]``: the answer to turn ``t + 1`` of question ``i`` (one per turn).
    references : dict, optional
        ``question_id -> one reference answer per turn`` (e.g. from :func:`judge_references`); it
        takes precedence over a question's own ``references``. A question whose category is in
        ``protocols.reference_categories`` and that has a reference is graded with the
        reference-guided protocol; without one, with the plain protocol.
    cache : JudgmentCache, optional
        Its store and judge key; each grade is stored under the cache's protocol hash combined with
        the hash of the protocol that made it (unless they are the same), so re-running costs
        nothing and a changed member protocol never hits a stale grade. Failed grades are not stored.

    Returns
    -------
    list of Grade, one per (question, turn), in order
        ``item_id`` is ``"{question_id}/t{turn}"`` (turn 1-based); ``protocol``,
        ``protocol_sha256`` and ``reference`` say how each was graded.
    """
    slots = conversation_slots(protocols, questions, answers, references=references, cache=cache)
    return _grade_slots(judge, slots)


def conversation_slots(protocols: GradingProtocols, questions: Sequence[JudgeQuestion],
                       answers: Sequence[Sequence[str]], *, references=None, cache=None) -> list[_Slot]:
    """The judge prompts of :func:`grade_conversations` (validated before any model call)."""
    if isinstance(protocols, JudgeProtocol):
        protocols = GradingProtocols(single=protocols)
    if not isinstance(protocols, GradingProtocols):
        raise ValueError(f"protocols must be a GradingProtocols, got {type(protocols).__name__}")
    if len(answers) != len(questions):
        raise ValueError(f"{len(answers)} answer tuples for {len(questions)} questions")
    references = dict(references or {})
    caches: dict[str, JudgmentCache | None] = {}
    slots = []
    for index, (question, turns) in enumerate(zip(questions, answers)):
        where = f"question {question.question_id!r} (index {index})"
        if isinstance(turns, str) or len(turns) != len(question.turns) or not all(isinstance(a, str) for a in turns):
            raise ValueError(f"{where}: needs {len(question.turns)} answer string(s), one per turn")
        if len(question.turns) > 1 and protocols.single_multi is None:
            raise ValueError(f"{where} has two turns, and the protocol {protocols.single.name!r} grades one turn only; "
                             "use a family with a multi-turn protocol (load_grading_protocols('mt-bench'))")  # fmt: skip
        refs = tuple(references[question.question_id]) if question.question_id in references else question.references
        if refs and (len(refs) != len(question.turns) or not all(isinstance(r, str) for r in refs)):
            raise ValueError(f"{where}: {len(refs)} reference(s) for {len(question.turns)} turn(s)")
        guided = bool(refs) and protocols.guided(question.category)
        if protocols.all_guided and not refs:
            raise ValueError(f"{where}: the protocol {protocols.single.name!r} grades against a reference answer, and "
                             "this question has none")  # fmt: skip
        for turn in range(1, len(question.turns) + 1):
            plain, with_ref = (protocols.single, protocols.reference) if turn == 1 else \
                (protocols.single_multi, protocols.reference_multi)
            protocol = with_ref if guided and with_ref is not None else plain
            messages = protocol.conversation_messages(questions=question.turns[:turn], answers=tuple(turns[:turn]),
                                                      references=refs[:turn] if protocol.uses_reference else None)
            if protocol.sha256 not in caches:
                caches[protocol.sha256] = cache_for(cache, protocol)
            extra = (("protocol", protocol.name), ("protocol_sha256", protocol.sha256),
                     ("reference", protocol.uses_reference))
            slots.append(_Slot(f"{question.question_id}/t{turn}", protocol, messages, caches[protocol.sha256], extra))
    return slots


def judge_references(
    judge: Backend,
    questions: Sequence[JudgeQuestion],
    *,
    max_new_tokens: int,
    cache: JudgmentCache | None = None,
    categories: Sequence[str] | None = None,
) -> dict[str, tuple[str, ...]]:
    """The judge's own answers to the questions, to grade against (Arena-Hard's instruction: the
    judge answers first). Greedy, both turns in context (:func:`answer_questions`).

    Parameters
    ----------
    judge : Backend
    questions : sequence of JudgeQuestion
    max_new_tokens : int
        Per turn.
    cache : JudgmentCache, optional
        Its store holds each question's references under ``reference:<judge key>:<sha256 of the
        turns and max_new_tokens>`` (the protocol plays no part), so a re-run generates nothing.
    categories : sequence of str, optional
        Only questions of these categories (e.g. ``family.reference_categories``); default all.

    Returns
    -------
    dict
        ``question_id -> one reference per turn``; a question for which the judge wrote an empty
        answer to some turn is left out (it is then graded without a reference).
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if isinstance(categories, str):
        raise ValueError("categories must be a sequence of category names, not one string")
    wanted = None if categories is None else {c.strip().lower() for c in categories}
    chosen = [q for q in questions if wanted is None or q.category.strip().lower() in wanted]
    identity = cache.judge_key if cache is not None else judge_key(judge)
    keys = [_reference_key(identity, q, max_new_tokens) for q in chosen]
    stored = cache.store.get_many(keys) if cache is not None else {}
    missing = [i for i, key in enumerate(keys) if key not in stored]
    written = answer_questions(judge, [chosen[i] for i in missing], max_new_tokens=max_new_tokens)
    fresh = {keys[i]: {"turns": list(turns)} for i, turns in zip(missing, written)}
    if cache is not None and fresh:
        cache.store.put_many(fresh)
    out = {}
    for question, key in zip(chosen, keys):
        turns = tuple((fresh.get(key) or stored.get(key) or {}).get("turns") or ())
        if len(turns) == len(question.turns) and all(isinstance(t, str) and t.strip() for t in turns):
            out[question.question_id] = turns
    return out


def _reference_key(identity: str, question: JudgeQuestion, max_new_tokens: int) -> str:
    payload = json.dumps({"turns": list(question.turns), "max_new_tokens": max_new_tokens}, ensure_ascii=False)
    return f"reference:{identity}:{hashlib.sha256(payload.encode('utf-8')).hexdigest()}"
