"""The frozen benchmark suite: a name and an exact list of tasks, versioned when the list changes."""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from leaderboard.evaluation.task_index import task_index
from leaderboard.models import BenchmarkSuite

SEED = 0  # every run and re-scoring of the suite draws few-shot examples and bootstrap samples with it


def _suite_tasks_clean(tasks: list[dict]) -> list[dict]:
    if not isinstance(tasks, list) or not tasks:
        raise ValidationError("A suite needs a non-empty list of tasks.")
    cleaned, seen = [], set()
    for entry in tasks:
        if not isinstance(entry, dict) or not isinstance(entry.get("task"), str) or not entry["task"]:
            raise ValidationError("Each suite entry needs a task name.")
        unknown = set(entry) - {"task", "num_fewshot", "limit"}
        if unknown:
            raise ValidationError(f"Suite entry {entry['task']!r} has unknown keys {sorted(unknown)}.")
        for key in ("num_fewshot", "limit"):
            value = entry.get(key)
            if value is not None and (type(value) is not int or value < (0 if key == "num_fewshot" else 1)):
                raise ValidationError(f"Suite entry {entry['task']!r}: {key} must be a whole number.")
        if entry["task"] in seen:
            raise ValidationError(f"Task {entry['task']!r} is in the suite twice.")
        seen.add(entry["task"])
        cleaned.append({"task": entry["task"], "num_fewshot": entry.get("num_fewshot"), "limit": entry.get("limit")})
    return cleaned


def suite_freeze(*, name: str, tasks: list[dict]) -> BenchmarkSuite:
    """The suite ``name`` with exactly these tasks: the existing version, or the next version."""
    cleaned = _suite_tasks_clean(tasks)
    digest = hashlib.sha256(json.dumps(cleaned, sort_keys=True).encode()).hexdigest()
    existing = BenchmarkSuite.objects.filter(name=name, tasks_sha256=digest).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            latest = BenchmarkSuite.objects.select_for_update().filter(name=name).order_by("-version").first()
            suite = BenchmarkSuite(
                name=name, version=(latest.version + 1) if latest else 1, tasks=cleaned, tasks_sha256=digest
            )
            suite.full_clean()
            suite.save()
            return suite
    except (IntegrityError, ValidationError):  # frozen concurrently by another process
        existing = BenchmarkSuite.objects.filter(name=name, tasks_sha256=digest).first()
        if existing is None:
            raise
        return existing


def suite_current() -> BenchmarkSuite:
    """The leaderboard suite as configured now (``LEADERBOARD_SUITE_NAME`` / ``LEADERBOARD_SUITE_TASKS``)."""
    return suite_freeze(name=settings.LEADERBOARD_SUITE_NAME, tasks=settings.LEADERBOARD_SUITE_TASKS)


def suite_plan(suite: BenchmarkSuite) -> list:
    """[(TaskConfig, entry)] for every leaf task of the suite (groups and tags expanded)."""
    index = task_index()
    plan, seen = [], set()
    for entry in suite.tasks:
        tasks, _groups = index.resolve([entry["task"]])
        for config in tasks:
            if config.task not in seen:
                seen.add(config.task)
                plan.append((config, entry))
    return plan
