"""The model-fetching script's command line: help, unknown options and a bad target are clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "fetch_smollm2.py"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_help_prints_usage_and_creates_nothing(tmp_path):
    result = run("--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "usage: fetch_smollm2.py" in result.stdout
    assert list(tmp_path.iterdir()) == []  # "--help" was once taken for a target folder


def test_unknown_option_is_refused(tmp_path):
    result = run("--bogus", cwd=tmp_path)
    assert result.returncode == 2
    assert "unrecognized arguments: --bogus" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_target_that_is_a_file_is_refused_untouched(tmp_path):
    target = tmp_path / "model"
    target.write_text("not a folder")
    result = run(str(target), cwd=tmp_path)
    assert result.returncode == 2
    assert "exists and is not a folder" in result.stderr
    assert target.read_text() == "not a folder"


def test_complete_checkpoint_is_left_alone(tmp_path):
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_text("{}")
    result = run(str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0
    assert "already at" in result.stdout
