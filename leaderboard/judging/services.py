"""Judge writes: saving a config (validated, hashed), requesting judge runs and audits (sent by name)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from arena.models import LanguageModel
from evalcore.judging import Judgment, audit_report, read_pairs
from evalcore.judging.questions import questions_sha256
from leaderboard import dispatch
from leaderboard.judging.configs import (
    SAMPLE_NAME,
    default_instructions,
    grading_key,
    grading_protocols_of,
    instructions_check,
    instructions_sha256,
    judge_spec,
    protocol_of,
    questions_of,
)
from leaderboard.models import JudgeAudit, JudgeConfig, JudgeRun, Submission

AUDIT_PAIRS_DEFAULT = "judges/llmbar_natural.json"
AUDIT_LIMIT_DEFAULT = 24


def _checked(field: str, check):
    try:
        return check()
    except ValueError as exc:
        raise ValidationError({field: str(exc)}) from None


def judge_config_check(config: JudgeConfig) -> None:
    """Fill the defaults and hashes of ``config``; ValidationError naming the field at fault.

    The protocol decides the kind: a pairwise config needs a baseline and one-turn instructions (the
    bundled LLMBar slice by default); a single-answer config has no baseline and takes its questions
    from ``instructions`` or ``questions_file`` (the bundled two-turn sample by default).
    """
    protocol_field = "protocol_yaml" if config.protocol_yaml.strip() else "protocol_name"
    protocol = _checked(protocol_field, lambda: protocol_of(config))
    config.kind = protocol.kind
    if protocol.kind == "pairwise" and (protocol.turns != 1 or protocol.uses_reference):
        raise ValidationError({protocol_field: f"protocol {protocol.name!r} compares two-turn conversations or needs "
                                               "reference answers; a pairwise judge here compares the answers to "
                                               "one-turn instructions (FastChat's pair-v2)"})  # fmt: skip
    _checked("judge_model_args", lambda: judge_spec(config))
    if config.judge_model_id is None and not isinstance(config.judge_model_args.get("path", ""), str):
        raise ValidationError({"judge_model_args": "path must be a string"})
    if config.kind == JudgeConfig.Kind.PAIRWISE:
        if config.questions_file.strip() or config.references_file.strip():
            raise ValidationError({"questions_file": "pairwise judges take their instructions from the instructions field"})
        if config.baseline_id is None:
            raise ValidationError({"baseline": "a pairwise protocol compares every answer with a baseline: choose one"})
        if not config.instructions:
            config.instructions = default_instructions()
        _checked("instructions", lambda: instructions_check(config.instructions))
        config.protocol_sha256 = protocol.sha256
        config.instructions_sha256 = instructions_sha256(config.instructions, config.max_new_tokens)
    else:
        if config.baseline_id is not None:
            raise ValidationError({"baseline": "single-answer grading has no baseline: leave it empty"})
        if config.references_file.strip() and not config.questions_file.strip():
            raise ValidationError({"references_file": "reference answers complete a questions_file: give both or neither"})
        if not config.instructions and not config.questions_file.strip():
            config.questions_file = SAMPLE_NAME
        field = "questions_file" if config.questions_file.strip() else "instructions"
        questions = _checked(field, lambda: questions_of(config))
        family = _checked(protocol_field, lambda: grading_protocols_of(config))
        if family.single_multi is None and any(len(q.turns) > 1 for q in questions):
            raise ValidationError({field: "two-turn questions need a protocol family that grades the second turn in context "
                                          "(the bundled mt-bench-single or mt-bench-single-logprob); this protocol grades one turn"})  # fmt: skip
        if family.all_guided:  # a lone reference-guided protocol grades every question against a reference
            if config.reference_mode == config.ReferenceMode.NONE:
                raise ValidationError({"reference_mode": f"protocol {family.single.name!r} grades against reference "
                                                         "answers only: choose given or judge"})  # fmt: skip
            missing = [q.question_id for q in questions if not q.references]
            if config.reference_mode == config.ReferenceMode.GIVEN and missing:
                raise ValidationError({field: f"protocol {family.single.name!r} grades against reference answers, and "
                                              f"question {missing[0]!r} has none (give them, or choose reference mode "
                                              "judge)"})  # fmt: skip
        config.protocol_sha256 = grading_key(config, family)
        config.instructions_sha256 = questions_sha256(questions, config.max_new_tokens)
    config.full_clean()


def judge_config_save(config: JudgeConfig) -> JudgeConfig:
    judge_config_check(config)
    config.save()
    return config


def judge_run_request(config: JudgeConfig, model: LanguageModel, *, again: bool = False) -> JudgeRun | None:
    """A PENDING run of ``model`` under ``config``, sent to the ``judge`` queue after commit.

    None when there is nothing to do: the model is the baseline, a run is already waiting or running,
    or (unless ``again``) a finished run used the config's current protocol and instructions.
    """
    if model.pk == config.baseline_id:
        return None
    live = JudgeRun.objects.filter(config=config, model=model, status__in=JudgeRun.ACTIVE)
    done = JudgeRun.objects.filter(config=config, model=model, status=JudgeRun.Status.FINISHED,
                                   protocol_sha256=config.protocol_sha256,
                                   instructions_sha256=config.instructions_sha256)  # fmt: skip
    if live.exists() or (done.exists() and not again):
        return None
    try:
        with transaction.atomic():
            run = JudgeRun.objects.create(config=config, model=model)
    except IntegrityError:  # requested concurrently: the other request's run stands
        return None
    dispatch.judge_run_send(run.pk)
    return run


def judge_runs_request(model_id: int) -> list[JudgeRun]:
    """Judge ``model`` with every active judge config (called when a submission finishes its suite)."""
    model = LanguageModel.objects.get(pk=model_id)
    runs = [judge_run_request(config, model) for config in JudgeConfig.objects.filter(active=True)]
    return [r for r in runs if r is not None]


def judge_candidates() -> list[LanguageModel]:
    """Every model a judge can score: arena models and those with a finished submission."""
    finished = Submission.objects.filter(status=Submission.Status.FINISHED).values("language_model_id")
    return list(LanguageModel.objects.filter(Q(in_arena=True) | Q(pk__in=finished)).order_by("name"))


def judge_runs_request_for_submission(submission_id: int) -> list[JudgeRun]:
    """A submission finished its suite: judge its catalogue model with every active judge."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission_id)
        if submission.status != Submission.Status.FINISHED:
            return []
        return judge_runs_request(submission.language_model_id)


def judge_run_requeue(run: JudgeRun) -> None:
    """Send a waiting or interrupted run again (a duplicate delivery is harmless)."""
    if run.status in JudgeRun.ACTIVE:
        dispatch.judge_run_send(run.pk)


def judge_audit_request(config: JudgeConfig, *, pairs_file: str = AUDIT_PAIRS_DEFAULT,
                        limit: int = AUDIT_LIMIT_DEFAULT) -> JudgeAudit:  # fmt: skip
    """A PENDING audit of ``config`` on the first ``limit`` pairs of ``pairs_file`` (under PODIUM_DATA_DIR)."""
    audit = JudgeAudit(config=config, pairs_file=pairs_file, limit=limit)
    audit.full_clean()
    audit.save()
    dispatch.judge_audit_send(audit.pk)
    return audit


def judge_audit_requeue(audit: JudgeAudit) -> None:
    """Send a waiting or interrupted audit again (its start is idempotent)."""
    if audit.status in (JudgeAudit.Status.PENDING, JudgeAudit.Status.RUNNING):
        dispatch.judge_audit_send(audit.pk)


MAX_IMPORT_BYTES = 64 * 1024 * 1024


def _json_file(path: Path, *, lines: bool):
    if not path.is_file():
        raise ValueError(f"{path} does not exist")
    if path.stat().st_size > MAX_IMPORT_BYTES:
        raise ValueError(f"{path} is larger than {MAX_IMPORT_BYTES} bytes")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        if lines:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None


def judge_audit_import(config: JudgeConfig, folder: Path) -> JudgeAudit:
    """Store the audit in ``folder`` (``python -m evalcore judge audit --out``) as a finished audit of
    ``config``, after recomputing its figures from ``judgments.jsonl``; ValueError naming what is wrong."""
    report = _json_file(folder / "report.json", lines=False)
    records = _json_file(folder / "judgments.jsonl", lines=True)
    if not isinstance(report, dict) or not isinstance(records, list) or not records:
        raise ValueError("report.json must be an object and judgments.jsonl must hold judgments")
    try:
        judgments = [Judgment.from_dict(r) for r in records]
        pairs = read_pairs(report["pairs_file"]) if Path(str(report.get("pairs_file", ""))).is_file() else None
    except (TypeError, KeyError) as exc:
        raise ValueError(f"judgments.jsonl or report.json lacks a field: {exc}") from None
    labels = {p.pair_id: p.label for p in pairs} if pairs else None
    if labels is None:
        raise ValueError("the pairs file the report names is not readable here: its labels are needed to check it")
    recomputed = audit_report(judgments, labels, rounds=report.get("kappa", {}).get("rounds", 1000) or 1000,
                              seed=report.get("kappa", {}).get("seed", 0) or 0)  # fmt: skip
    for key in ("accuracy_swap_average", "accuracy_ab", "accuracy_ba", "first_position_rate", "consistency"):
        if key not in report or report[key].get("value") != recomputed[key]["value"]:
            raise ValueError(f"report.json's {key} does not match its judgments.jsonl")
    protocol = report.get("protocol") or {}
    audit = JudgeAudit(config=config, pairs_file=str(report["pairs_file"])[:300], limit=max(1, min(1000, recomputed["pairs"])),
                       status=JudgeAudit.Status.FINISHED, finished_at=timezone.now(),
                       protocol_sha256=str(protocol.get("sha256", ""))[:64],
                       report={**recomputed, "judge": report.get("judge"), "protocol": protocol,
                               "pairs_file": report["pairs_file"], "records": records, "imported": True})  # fmt: skip
    audit.full_clean()
    audit.save()
    return audit
