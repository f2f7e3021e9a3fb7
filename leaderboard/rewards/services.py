"""Reward-model writes: importing an ``evalcore reward --out`` folder after recomputing its figures."""

from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction

from evalcore.reward.stored import verify_report
from leaderboard.models import RewardModelResult

MAX_IMPORT_BYTES = 256 * 1024 * 1024


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


def reward_result_import(name: str, folder: Path) -> tuple[RewardModelResult, bool]:
    """Store the reward run in ``folder`` (report.json, rewards.jsonl) as ``name``'s result on its pairs,
    replacing an earlier import of the same name and pairs; (result, created). ValueError naming what is
    wrong: a missing or malformed file, or a figure that its rewards do not give."""
    report = verify_report(
        _read(folder / "report.json", lines=False), _read(folder / "rewards.jsonl", lines=True)
    )
    weights = str((report.get("model") or {}).get("weights_sha256", ""))[:64]
    with transaction.atomic():
        result = (
            RewardModelResult.objects.select_for_update()
            .filter(name=name, pairs_key=report["pairs_key"])
            .first()
        )
        created = result is None
        result = result or RewardModelResult(name=name, pairs_key=report["pairs_key"])
        result.kind, result.weights_sha256 = report["kind"], weights
        result.accuracy, result.report = report["overall"]["value"], report
        try:
            result.full_clean()
        except Exception as exc:  # noqa: BLE001 - a ValidationError's messages as one line
            raise ValueError("; ".join(getattr(exc, "messages", [str(exc)]))) from None
        result.save()
    return result, created
