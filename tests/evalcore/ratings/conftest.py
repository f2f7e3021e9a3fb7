"""Fixtures for the ratings tests: where the shared public data lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def shared_data_dir() -> Path:
    """``$PODIUM_DATA_DIR`` if set, else ``../shared/data`` from the repository root."""
    env = os.environ.get("PODIUM_DATA_DIR")
    if env:
        return Path(env)
    repo_root = Path(__file__).resolve().parents[3]
    return (repo_root / ".." / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.fail(f"shared data not found at {path}: set PODIUM_DATA_DIR or put shared/ beside the repo")
    return path
