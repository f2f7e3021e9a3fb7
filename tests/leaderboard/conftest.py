"""Fixtures for the submission tests: tiny real checkpoints and per-test storage folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.leaderboard.checkpoint_factory import tiny_checkpoint


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, smollm2_dir) -> Path:
    return tiny_checkpoint(str(tmp_path_factory.getbasetemp()), str(smollm2_dir))


@pytest.fixture(scope="session")
def make_checkpoint(tmp_path_factory, smollm2_dir):
    """``make_checkpoint(seed=1, max_shard_size="1MB")``: another real tiny checkpoint (cached)."""
    root = str(tmp_path_factory.getbasetemp())

    def make(*, seed: int = 0, max_shard_size: str | None = None) -> Path:
        return tiny_checkpoint(root, str(smollm2_dir), seed=seed, max_shard_size=max_shard_size)

    return make


@pytest.fixture
def submissions_dir(tmp_path, settings) -> Path:
    folder = tmp_path / "submissions"
    settings.LEADERBOARD_SUBMISSIONS_DIR = folder
    settings.LEADERBOARD_REQUEST_CACHE_DIR = tmp_path / "request-cache"
    settings.LEADERBOARD_TRAINING_DATA_DIR = tmp_path / "training-data"
    return folder


@pytest.fixture
def uploads_dir(tmp_path, settings, submissions_dir):
    """Resumable uploads land in a folder of the test's own."""
    settings.LEADERBOARD_UPLOADS_DIR = tmp_path / "uploads"
    return settings.LEADERBOARD_UPLOADS_DIR
