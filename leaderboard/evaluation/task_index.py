"""The engine's tasks as a worker loads them: the bundled ones, ``LEADERBOARD_TASK_PATHS`` and
``LEADERBOARD_TRUSTED_TASK_PATHS``.

Python code beside task files (``!function``) runs only from the bundled tasks and the trusted
folders, the operator's own; a file in ``LEADERBOARD_TASK_PATHS`` that names code is skipped, and
asking for its task says why and which setting would trust it.
"""

from __future__ import annotations

import functools
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

from evalcore.engine import TaskConfig, TaskIndex
from evalcore.engine.registry import BUNDLED

TRUST_HINT = (
    "Python code beside task files runs only from folders the operator trusts: "
    "list the folder in LEADERBOARD_TRUSTED_TASK_PATHS (not LEADERBOARD_TASK_PATHS) if it is the operator's own"
)


def _task_files_signature(paths: tuple[str, ...]) -> tuple:
    stats = [f.stat() for folder in (BUNDLED, *map(Path, paths)) if folder.is_dir() for f in folder.rglob("*")]
    return len(stats), max((s.st_mtime_ns for s in stats), default=0)


@functools.lru_cache(maxsize=4)
def _task_index(paths: tuple[str, ...], trusted: tuple[str, ...], signature: tuple) -> TaskIndex:
    """Parsing every task file takes seconds: a worker keeps the index until a task file changes."""
    return TaskIndex(list(paths), trusted_paths=list(trusted))


def task_index() -> TaskIndex:
    """The index of every task the engine knows now (cached until a task file changes)."""
    paths = tuple(str(p) for p in settings.LEADERBOARD_TASK_PATHS)
    trusted = tuple(str(p) for p in settings.LEADERBOARD_TRUSTED_TASK_PATHS)
    return _task_index(paths, trusted, _task_files_signature(paths + trusted))


def task_config_current(task: str) -> TaskConfig:
    """The task's config as the worker would load it now (bundled tasks and the configured folders)."""
    index = task_index()
    config = index.tasks.get(task)
    if isinstance(config, TaskConfig):
        return config
    skipped = index.not_loaded(task)
    if skipped is not None:
        path, reason = skipped
        hint = f" {TRUST_HINT}." if "trusted task folders" in reason else ""
        raise ValidationError(f"{task!r} cannot load from {path}: {reason}.{hint}")
    raise ValidationError(f"{task!r} is not a task the engine knows now; give its config to re-score it.")
