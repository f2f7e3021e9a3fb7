"""Reward-model writes: importing an ``evalcore reward --out`` folder after recomputing its figures, and
scoring a reward model on a worker from the admin (PENDING → RUNNING → FINISHED | FAILED).

Both store through one path (:func:`_store`): the report recomputed by ``verify_report``, so a result
scored on the site holds exactly what ``reward_import`` of the same run would hold.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from evalcore.reward.pairs import parse_pairs_spec, read_reward_pairs
from evalcore.reward.run import DEFAULT_BETA, reward_run
from evalcore.reward.stored import pairs_key, verify_report
from leaderboard import dispatch
from leaderboard.models import RewardKind, RewardModelResult, RewardStatus
from leaderboard.submissions.lifecycle import worker_take

MAX_IMPORT_BYTES = 256 * 1024 * 1024
MAX_SCORE_LIMIT = 100_000
HEARTBEAT_EVERY_S = 30.0


class RewardScoreBusy(Exception):
    """Another worker is scoring this result right now: try again later."""


def _read(path: Path, *, lines: bool):
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
    except RecursionError:
        raise ValueError(f"{path} nests JSON too deeply") from None


def _fill(result: RewardModelResult, report: dict) -> None:
    """Put a verified report's figures on ``result`` (FINISHED), checked by ``full_clean``."""
    result.kind = report["kind"]
    result.weights_sha256 = str((report.get("model") or {}).get("weights_sha256", ""))[:64]
    result.accuracy, result.report = report["overall"]["value"], report
    result.status, result.failure_reason = RewardStatus.FINISHED, ""
    try:
        result.full_clean()
    except ValidationError as exc:
        raise ValueError("; ".join(exc.messages)) from None


def reward_result_import(name: str, folder: Path) -> tuple[RewardModelResult, bool]:
    """Store the reward run in ``folder`` (report.json, rewards.jsonl) as ``name``'s result on its pairs,
    replacing an earlier import of the same name and pairs; (result, created). ValueError naming what is
    wrong: a missing or malformed file, a figure that its rewards do not give, or a scoring of the same
    name and pairs that a worker is doing now."""
    report = verify_report(
        _read(folder / "report.json", lines=False), _read(folder / "rewards.jsonl", lines=True)
    )
    with transaction.atomic():
        result = (
            RewardModelResult.objects.select_for_update()
            .filter(name=name, pairs_key=report["pairs_key"])
            .first()
        )
        if result is not None and result.status in RewardModelResult.ACTIVE:
            raise ValueError(f"{name} is being scored on these pairs on a worker ({result.status}); "
                             "import once it has finished or failed")  # fmt: skip
        created = result is None
        result = result or RewardModelResult(name=name, pairs_key=report["pairs_key"])
        _fill(result, report)
        result.save()
    return result, created


# -- scoring from the site ------------------------------------------------------------------------


def _under(root, rel: str, field: str, *, folder: bool) -> Path:
    """``rel`` inside ``root``: a relative path without ``..`` (as judge configs' paths) that exists as a
    folder or a file; ValidationError naming ``field``."""
    rel = (rel or "").strip()
    what = "PODIUM_MODELS_DIR" if folder else "PODIUM_DATA_DIR"
    if not rel or Path(rel).is_absolute() or ".." in Path(rel).parts or "\x00" in rel or len(rel) > 300:
        raise ValidationError({field: f"give a path relative to {what}, without '..'"})
    if not root:
        raise ValidationError({field: f"{what} is not set"})
    path = Path(root) / rel
    if folder and not path.is_dir():
        raise ValidationError({field: f"{rel} is not a folder under {what}"})
    if not folder and not path.is_file():
        raise ValidationError({field: f"{rel} is not a file under {what}"})
    return path


def reward_score_request(*, name: str, checkpoint: str, kind: str, pairs_file: str, requested_by,
                         reference: str = "", limit: int | None = None,
                         beta: float | None = None) -> tuple[RewardModelResult, bool]:  # fmt: skip
    """Queue the scoring of the reward model in ``checkpoint`` (under PODIUM_MODELS_DIR) on ``pairs_file``
    (under PODIUM_DATA_DIR) as ``name``'s result (staff only): (result, queued).

    ``kind`` is ``classifier`` or ``dpo`` (then ``reference`` is the reference's folder and ``beta``
    DPO's beta). The pairs file is read and checked now (a malformed one is refused here, not on the
    worker). A scoring of the same name on the same pairs that is queued or running is returned and
    nothing is sent (two clicks at once are kept apart by a row lock and the unique constraint); a
    finished or failed one is scored again in place. ValidationError naming the field for anything else.
    """
    if not (getattr(requested_by, "is_authenticated", False) and requested_by.is_staff):
        raise PermissionDenied("Only staff can score a reward model.")
    name = (name or "").strip() or Path((checkpoint or "").strip().rstrip("/")).name
    if not name or len(name) > 100:
        raise ValidationError({"name": "give a name of 1 to 100 characters"})
    if kind not in RewardKind.values:
        raise ValidationError({"kind": f"kind must be one of {', '.join(RewardKind.values)}"})
    _under(settings.PODIUM_MODELS_DIR, checkpoint, "checkpoint", folder=True)
    if kind == RewardKind.DPO:
        _under(settings.PODIUM_MODELS_DIR, reference, "reference", folder=True)
        beta = DEFAULT_BETA if beta is None else beta
        if isinstance(beta, bool) or not isinstance(beta, int | float) or not (0 < beta < float("inf")):
            raise ValidationError({"beta": "beta must be a positive number"})
    elif (reference or "").strip() or beta is not None:
        raise ValidationError({"reference": "a reference folder and beta are for a DPO policy only"})
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SCORE_LIMIT):
        raise ValidationError({"limit": f"limit must be a whole number from 1 to {MAX_SCORE_LIMIT}"})
    path = _under(settings.PODIUM_DATA_DIR, pairs_file, "pairs_file", folder=False)
    try:
        category, _ = parse_pairs_spec(str(path))
        _pairs, files = read_reward_pairs([f"{category}={path}"])
    except ValueError as exc:
        raise ValidationError({"pairs_file": str(exc).replace(str(path), pairs_file.strip())}) from None
    key = pairs_key(files)
    request = {"checkpoint": checkpoint.strip(), "kind": kind, "reference": (reference or "").strip() if kind == "dpo" else "",
               "pairs_file": pairs_file.strip(), "category": category, "sha256": files[0].sha256, "limit": limit,
               "beta": beta if kind == "dpo" else None}  # fmt: skip
    try:
        with transaction.atomic():
            result = RewardModelResult.objects.select_for_update().filter(name=name, pairs_key=key).first()
            if result is not None and result.status in RewardModelResult.ACTIVE:
                return result, False
            result = result or RewardModelResult(name=name, pairs_key=key)
            result.kind, result.weights_sha256, result.accuracy, result.report = kind, "", None, {}
            result.status, result.failure_reason, result.request = RewardStatus.PENDING, "", request
            result.requested_by, result.heartbeat_at, result.worker = requested_by, None, ""
            result.save()
            dispatch.reward_score_send(result.pk)
    except IntegrityError:  # the other of two simultaneous first clicks created it
        return RewardModelResult.objects.get(name=name, pairs_key=key), False
    return result, True


def reward_score_start(result_id: int) -> RewardModelResult | None:
    """PENDING (or RUNNING after its worker died) → RUNNING; None when there is nothing to do."""
    with transaction.atomic():
        result = RewardModelResult.objects.select_for_update().filter(pk=result_id).first()
        if result is None or result.status not in RewardModelResult.ACTIVE:
            return None
        worker_take(result, running=RewardStatus.RUNNING, busy=RewardScoreBusy, what=f"reward scoring {result_id}")
        result.save(update_fields=["status", "heartbeat_at", "worker", "attempts", "imported_at"])
    return result


def _heartbeat(result_id: int):
    """A ``progress(n)`` for evalcore that refreshes the heartbeat at most every HEARTBEAT_EVERY_S."""
    last = [time.monotonic()]

    def progress(_n: int) -> None:
        if time.monotonic() - last[0] >= HEARTBEAT_EVERY_S:
            last[0] = time.monotonic()
            RewardModelResult.objects.filter(pk=result_id).update(heartbeat_at=timezone.now())

    return progress


def reward_score_execute(result_id: int) -> None:
    """Score a RUNNING result with :func:`evalcore.reward.run.reward_run` (what ``python -m evalcore
    reward`` runs) and store it as ``reward_import`` would; raises on any failure (the task records it)."""
    request = RewardModelResult.objects.get(pk=result_id).request
    models_dir, dpo = settings.PODIUM_MODELS_DIR, request.get("kind") == RewardKind.DPO
    try:
        checkpoint = _under(models_dir, request.get("checkpoint", ""), "checkpoint", folder=True)
        pairs = _under(settings.PODIUM_DATA_DIR, request.get("pairs_file", ""), "pairs_file", folder=False)
        reference = _under(models_dir, request.get("reference", ""), "reference", folder=True) if dpo else None
    except ValidationError as exc:  # the folder or the file went away after the request
        raise ValueError("; ".join(exc.messages)) from None
    report, records = reward_run(
        [f"{request['category']}={pairs}"], model="hf", model_args={"path": str(checkpoint)},
        ref_model_args={"path": str(reference)} if dpo else None,
        beta=request.get("beta") or DEFAULT_BETA, limit=request.get("limit"), progress=_heartbeat(result_id),
    )  # fmt: skip
    verified = verify_report(json.loads(json.dumps(report)), [r.as_dict() for r in records])
    with transaction.atomic():
        result = RewardModelResult.objects.select_for_update().get(pk=result_id)
        if result.status != RewardStatus.RUNNING:
            return  # deleted, or finished by another worker meanwhile
        if verified["pairs_key"] != result.pairs_key:
            raise ValueError(f"the pairs file {request.get('pairs_file')} changed after the scoring was queued; "
                             "queue it again")  # fmt: skip
        _fill(result, verified)
        result.save()


def reward_score_fail(result_id: int, *, reason: str) -> None:
    """RUNNING → FAILED with ``reason`` (at most 2,000 characters, PODIUM_MODELS_DIR written ``<models>``)."""
    with transaction.atomic():
        result = RewardModelResult.objects.select_for_update().filter(pk=result_id).first()
        if result is None:
            return
        result.status = RewardStatus.FAILED
        models_dir = str(settings.PODIUM_MODELS_DIR or "")
        if models_dir:  # the checkpoint's folder is named, not spelled out (the task redacts the others)
            reason = reason.replace(models_dir, "<models>")
        result.failure_reason = (reason.strip() or "unknown error")[:2000]
        result.save(update_fields=["status", "failure_reason", "imported_at"])

