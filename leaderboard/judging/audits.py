"""Auditing a judge config on labelled pairs (LLMBar's format) on a worker: accuracy in each order,
swap-and-average and both-agree accuracy, consistency, the first-position rate and Cohen's kappa,
each with its 95% interval (``evalcore.judging.audit_report``). Verdicts go through the same
database cache as judge runs, so auditing again costs nothing."""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evalcore.judging import (
    GradeItem,
    JudgmentCache,
    audit_report,
    grade_answers,
    judge_key,
    judge_pairs,
    read_pairs,
)
from evalcore.judging.audit import rate
from leaderboard.judging.configs import judge_spec, model_load, protocol_of
from leaderboard.judging.store import DatabaseStore
from leaderboard.models import JudgeAudit

log = logging.getLogger(__name__)
ROUNDS = 1000
SEED = 0


def pairs_path(name: str) -> Path:
    """``name`` under PODIUM_DATA_DIR; ValueError for anything that leaves it."""
    root = Path(settings.PODIUM_DATA_DIR).resolve()
    path = (root / name).resolve()
    if not name or Path(name).is_absolute() or not path.is_relative_to(root):
        raise ValueError(f"pairs file {name!r} must be a path inside the data folder")
    return path


def grading_audit(judge, protocol, pairs, *, cache) -> tuple[dict, list[dict]]:
    """A single-answer judge against labelled pairs: both answers of each pair graded alone (the
    protocol's plain form); correct when the answer people preferred gets the higher grade. Equal
    grades are ties, counted as wrong; a pair with a failed grade is left out and counted."""
    items = [GradeItem(f"{p.pair_id}/{side}", p.question, answer, p.reference if protocol.uses_reference else None)
             for p in pairs for side, answer in ((1, p.answer_1), (2, p.answer_2))]  # fmt: skip
    grades = {g.item_id: g for g in grade_answers(judge, protocol, items, cache=cache)}
    correct, failed, ties = [], [], []
    for p in pairs:
        one, two = grades[f"{p.pair_id}/1"], grades[f"{p.pair_id}/2"]
        if one.status != "ok" or two.status != "ok" or p.label not in (1, 2):
            failed.append(p.pair_id)
            continue
        better = 1 if one.score > two.score else 2 if two.score > one.score else 0
        ties.append(1.0 if better == 0 else 0.0)
        correct.append(1.0 if better == p.label else 0.0)
    report = {"kind": "single", "pairs": len(correct), "failed_pairs": failed, "ties_swap_average": int(sum(ties)),
              "accuracy_grades": rate(correct), "tie_rate_grades": rate(ties)}  # fmt: skip
    return report, [g.as_dict() for g in grades.values()]


def _start(audit_id: int) -> JudgeAudit | None:
    with transaction.atomic():
        audit = JudgeAudit.objects.select_for_update().select_related("config").filter(pk=audit_id).first()
        if audit is None or audit.status not in (JudgeAudit.Status.PENDING, JudgeAudit.Status.RUNNING):
            return None
        audit.status = JudgeAudit.Status.RUNNING
        audit.save(update_fields=["status"])
    return audit


def judge_audit_execute(audit_id: int) -> str:
    """Run a PENDING audit and store its report (or FAILED with the reason); safe to run twice."""
    audit = _start(audit_id)
    if audit is None:
        return "nothing to do"
    try:
        pairs = read_pairs(pairs_path(audit.pairs_file))[: audit.limit]
        judge = model_load(judge_spec(audit.config))
        protocol = protocol_of(audit.config, tokenizer=getattr(judge, "tokenizer", None))
        cache = JudgmentCache(DatabaseStore(), judge_key=judge_key(judge), protocol_sha256=protocol.sha256)
        if protocol.kind == "single":
            report, records = grading_audit(judge, protocol, pairs, cache=cache)
        else:
            judgments = judge_pairs(judge, protocol, pairs, cache=cache)
            report = audit_report(judgments, {p.pair_id: p.label for p in pairs}, rounds=ROUNDS, seed=SEED)
            records = [j.as_dict() for j in judgments]
    except Exception as exc:  # noqa: BLE001 - every failure becomes the audit's reason
        log.exception("judge audit %s failed", audit_id)
        JudgeAudit.objects.filter(pk=audit_id).update(status=JudgeAudit.Status.FAILED, finished_at=timezone.now(),
                                                      failure_reason=f"{type(exc).__name__}: {exc}"[:1000])  # fmt: skip
        return "failed"
    report.update(judge=judge.identity.as_dict(), protocol={"name": protocol.name, "sha256": protocol.sha256},
                  pairs_file=audit.pairs_file, records=records)  # fmt: skip
    JudgeAudit.objects.filter(pk=audit_id).update(
        status=JudgeAudit.Status.FINISHED, finished_at=timezone.now(), report=report,
        judge_key=judge_key(judge)[:200], protocol_sha256=protocol.sha256, failure_reason="",
    )  # fmt: skip
    return "finished"
