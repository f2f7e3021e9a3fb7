"""Running a single-answer judge run on a worker: answers to every turn, one grade per turn, scores.

The model answers each question (turn 2 with its own turn-1 answer in the conversation); answers are
stored per (model, question set hash, question, turn) and reused by every run and every judge. The
judge grades each turn alone (turn 2 in context), reference-guided for maths, reasoning and coding
questions when the config says so (the questions' own references, or references the judge writes
first, Arena-Hard's instruction). Grades go through the same database cache as pairwise verdicts, so
a retry or a re-run computes nothing again; a failed grade is stored as failed, never as a score.
The run's results: the mean grade with a bootstrap interval over questions, per category and per
turn (``evalcore.judging.scores.grade_summary``), and what the grading cost (time and tokens per
1,000 grades, ``evalcore.judging.cost``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from django.db import transaction
from django.utils import timezone

from evalcore.judging import JudgmentCache, judge_key
from evalcore.judging.answering import answer_questions
from evalcore.judging.cost import MeteredBackend, cost_per_1000
from evalcore.judging.grading import grade_bounds, grade_conversations, judge_references
from evalcore.judging.questions import JudgeQuestion, questions_sha256
from evalcore.judging.scores import grade_summary
from leaderboard.judging.configs import (
    answerer_of,
    grading_key,
    grading_protocols_of,
    judge_spec,
    model_load,
    questions_of,
)
from leaderboard.judging.states import answers_claim, judge_run_progress
from leaderboard.judging.store import DatabaseStore
from leaderboard.models import JudgeAnswer, JudgeGrade, JudgeRun

log = logging.getLogger(__name__)

ANSWER_POLL_S = 2.0
ANSWER_WAIT_MAX_S = 3600.0


def _stored(model, set_sha: str) -> dict[tuple[int, int], str]:
    rows = JudgeAnswer.objects.filter(model=model, instructions_sha256=set_sha).values_list("idx", "turn", "text")
    return {(idx, turn): text for idx, turn, text in rows}


def _missing(questions: list[JudgeQuestion], stored: dict) -> list[int]:
    return [i for i, q in enumerate(questions) if any((i, t) not in stored for t in range(1, len(q.turns) + 1))]


def turn_answers_ensure(model, questions: list[JudgeQuestion], set_sha: str, *, max_new_tokens: int, report,
                        run_id: int | None = None) -> list[tuple[str, ...]]:  # fmt: skip
    """The stored answers of ``model`` to every turn of every question, generating the missing ones
    (while another live run generates them, this one waits for them, as pairwise runs do)."""
    stored = _stored(model, set_sha)
    missing = _missing(questions, stored)
    waited = 0.0
    while missing and run_id is not None and not answers_claim(run_id, model.name, set_sha, len(missing)):
        if waited >= ANSWER_WAIT_MAX_S:
            raise RuntimeError(f"waited {waited:.0f} s for another run to generate {model.name}'s answers")
        report(f"waiting for the answers of {model.name}", 0, len(missing))
        time.sleep(ANSWER_POLL_S)
        waited += ANSWER_POLL_S
        stored = _stored(model, set_sha)
        missing = _missing(questions, stored)
    if missing:
        spec, generation = answerer_of(model)
        log.info("grading answers: %s answers %d questions (%s)", model.name, len(missing), generation["source"])
        done = [0]

        def progress(n: int) -> None:
            done[0] += n
            report(f"answers of {model.name}", done[0], sum(len(questions[i].turns) for i in missing))

        texts = answer_questions(
            model_load(spec), [questions[i] for i in missing], max_new_tokens=max_new_tokens,
            temperature=generation.get("temperature", 0.0), top_p=generation.get("top_p", 1.0),
            seed=generation.get("seed", 0), system_prompt=generation.get("system_prompt") or None, progress=progress,
        )  # fmt: skip
        rows = [JudgeAnswer(model=model, instructions_sha256=set_sha, idx=i, turn=t, text=text)
                for i, turns in zip(missing, texts) for t, text in enumerate(turns, start=1)]  # fmt: skip
        JudgeAnswer.objects.bulk_create(rows, update_conflicts=True, update_fields=["text"],
                                        unique_fields=["model", "instructions_sha256", "idx", "turn"])  # fmt: skip
        stored.update({(r.idx, r.turn): r.text for r in rows})
    return [tuple(stored[(i, t)] for t in range(1, len(q.turns) + 1)) for i, q in enumerate(questions)]


def _turn_of(item_id: str) -> tuple[str, int]:
    question_id, _, turn = str(item_id).rpartition("/t")
    return question_id, int(turn)


def logprob_record(grade, family) -> dict:
    """What a log-prob grade stores beside its score (empty for a parsed one): the scale, the
    normalised probabilities, the mass on the scale and the normalised entropy."""
    if getattr(grade, "probabilities", None) is None:
        return {}
    members = [family.single, family.single_multi, family.reference, family.reference_multi]
    protocol = next((p for p in members if p is not None and p.sha256 == grade.protocol_sha256), family.single)
    return {"scale": list(protocol.verdict.scale), "prefix": protocol.verdict.prefix,
            "probabilities": list(grade.probabilities), "mass": grade.mass, "entropy": grade.entropy}


def _grades_store(run_id: int, questions: list[JudgeQuestion], grades, reference_mode: str, family=None) -> None:
    index = {q.question_id: i for i, q in enumerate(questions)}
    rows = []
    for g in grades:
        question_id, turn = _turn_of(g.item_id)
        q = questions[index[question_id]]
        used = getattr(g, "reference", None)
        rows.append(JudgeGrade(
            run_id=run_id, idx=index[question_id], turn=turn, question_id=question_id[:200], category=q.category[:100],
            score=g.score if g.status == "ok" else None, ok=g.status == "ok", raw=g.raw or "",
            error=(g.error or "")[:500] if g.status != "ok" else "", prompt_sha256=g.prompt_sha256,
            protocol_sha256=(getattr(g, "protocol_sha256", "") or "")[:64],
            reference=(reference_mode if used else "")[:8],
            logprob=logprob_record(g, family) if family is not None and g.status == "ok" else {},
        ))  # fmt: skip
    JudgeGrade.objects.bulk_create(rows, batch_size=500, update_conflicts=True, unique_fields=["run", "idx", "turn"],
                                   update_fields=["question_id", "category", "score", "ok", "error", "raw", "reference",
                                                  "prompt_sha256", "protocol_sha256", "logprob"])  # fmt: skip


def grade_results(grades, questions: list[JudgeQuestion], model_name: str, family=None) -> dict:
    """The run's figures from its grades: mean, 95% interval (cluster-robust t over questions, clipped
    to the family's scale), per category and per turn."""
    scores = {model_name: {str(g.item_id): (g.score if g.status == "ok" else None) for g in grades}}
    categories = {q.question_id: q.category for q in questions if q.category}
    bounds = grade_bounds(family) if family is not None else None
    summary = grade_summary(scores, categories=categories, bounds=bounds)[model_name]
    return {
        "kind": "single", "score": summary.get("mean"), "ci_low": summary.get("ci_low"), "ci_high": summary.get("ci_high"),
        "interval": summary.get("interval"), "bounds": list(bounds) if bounds else None,
        "n": summary.get("n", 0), "failed": summary.get("failed", 0), "by_category": summary.get("by_category", {}),
        "by_turn": summary.get("by_turn", {}), "notes": list(summary.get("notes", [])), "questions": len(questions),
    }  # fmt: skip


def grade_run_execute(run_id: int) -> None:
    """Grade a RUNNING single-answer run's model on the config's questions and store everything."""
    run = JudgeRun.objects.select_related("config", "config__judge_model", "model").get(pk=run_id)
    if run.status != JudgeRun.Status.RUNNING:
        raise RuntimeError(f"judge run {run_id} is {run.status}, not RUNNING")
    config = run.config
    questions = questions_of(config)
    set_sha = questions_sha256(questions, config.max_new_tokens)
    progress: dict = {}

    def report(stage: str, done: int, total: int) -> None:
        progress.update(stage=stage, done=done, total=total)
        judge_run_progress(run_id, progress)

    report("loading the judge", 0, 1)
    judge = model_load(judge_spec(config))
    family = grading_protocols_of(config)
    keys = {"judge_key": judge_key(judge)[:200], "protocol_sha256": grading_key(config, family),
            "instructions_sha256": set_sha}  # fmt: skip
    JudgeRun.objects.filter(pk=run_id).update(**keys)
    answers = turn_answers_ensure(run.model, questions, set_sha, max_new_tokens=config.max_new_tokens, report=report,
                                  run_id=run_id)  # fmt: skip
    cache = JudgmentCache(DatabaseStore(), judge_key=judge_key(judge), protocol_sha256=family.sha256)
    metered = MeteredBackend(judge)
    started = time.monotonic()
    references = None
    if config.reference_mode == config.ReferenceMode.JUDGE:
        report("the judge writes its references", 0, len(questions))
        references = judge_references(metered, questions, max_new_tokens=config.max_new_tokens, cache=cache,
                                      categories=None if family.all_guided else family.reference_categories)
    report("grading", 0, sum(len(q.turns) for q in questions))
    mode = config.reference_mode
    graded = questions if mode == config.ReferenceMode.GIVEN else [replace(q, references=()) for q in questions]
    grades = grade_conversations(metered, family, graded, answers, cache=cache, references=references)
    seconds = time.monotonic() - started
    fresh = sum(1 for g in grades if not g.cached)
    log.info("judge run %s: %d grades, %d computed, %d from the cache", run_id, len(grades), fresh, len(grades) - fresh)
    results = grade_results(grades, questions, run.model.name, family)
    results["judgments_computed"] = fresh
    results["cost"] = cost_per_1000(seconds=seconds, judgments=fresh, prompt_tokens=metered.prompt_tokens,
                                    completion_tokens=metered.completion_tokens) if fresh else None  # fmt: skip
    with transaction.atomic():
        _grades_store(run_id, questions, grades, mode, family)
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        run.results = results
        run.status = JudgeRun.Status.FINISHED
        run.finished_at = timezone.now()
        run.failure_reason = ""
        run.progress = {**progress, "stage": "finished"}
        run.save()
