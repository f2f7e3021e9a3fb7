"""The engine's tasks as a worker loads them: the bundled ones plus ``LEADERBOARD_TASK_PATHS``."""

from __future__ import annotations

import functools
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

from evalcore.engine import TaskConfig, TaskIndex
from evalcore.engine.registry import BUNDLED


def _task_files_signature(paths: tuple[str, ...]) -> tuple:
    stats = [f.stat() for folder in (BUNDLED, *map(Path, paths)) if folder.is_dir() for f in folder.rglob("*")]
    return len(stats), max((s.st_mtime_ns for s in stats), default=0)


@functools.lru_cache(maxsize=4)
def _task_index(paths: tuple[str, ...], signature: tuple) -> TaskIndex:
    """Parsing every task file takes seconds: a worker keeps the index until a task file changes."""
    return TaskIndex(list(paths))


def task_index() -> TaskIndex:
    """The index of every task the engine knows now (cached until a task file changes)."""
    paths = tuple(str(p) for p in settings.LEADERBOARD_TASK_PATHS)
    return _task_index(paths, _task_files_signature(paths))


def task_config_current(task: str) -> TaskConfig:
    """The task's config as the worker would load it now (bundled tasks + ``LEADERBOARD_TASK_PATHS``)."""
    config = task_index().tasks.get(task)
    if not isinstance(config, TaskConfig):
        raise ValidationError(f"{task!r} is not a task the engine knows now; give its config to re-score it.")
    return config
