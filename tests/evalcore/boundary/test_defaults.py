"""Every entry point resolves PODIUM_DATA_DIR the same way: the variable, else shared/data beside the
checkout (README's default); a command from a checkout runs without exporting it."""

from __future__ import annotations

import subprocess
import sys

from django.conf import settings

from evalcore.boundary.defaults import data_dir, default_data_dir
from evalcore.engine.data import resolve_path
from tests.conftest import REPO_ROOT, clean_env


def test_the_default_is_the_readmes_and_the_sites(monkeypatch, tmp_path):
    assert default_data_dir() == REPO_ROOT.parent / "shared" / "data"
    monkeypatch.delenv("PODIUM_DATA_DIR", raising=False)
    assert data_dir() == default_data_dir()
    assert resolve_path("$PODIUM_DATA_DIR/benchmarks/gsm8k/test.jsonl") == default_data_dir() / "benchmarks/gsm8k/test.jsonl"
    monkeypatch.setenv("PODIUM_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path and resolve_path("${PODIUM_DATA_DIR}/x") == tmp_path / "x"
    monkeypatch.setenv("PODIUM_DATA_DIR", "  ")
    assert data_dir() == default_data_dir()  # blank is unset, as everywhere else
    assert settings.PODIUM_DATA_DIR.name == "data"


def test_an_evalcore_command_from_a_checkout_needs_no_export(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("nothing from any benchmark here\n")
    env = clean_env(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.pop("PODIUM_DATA_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "evalcore", "contamination", "scan", "--tasks", "gsm8k", "--out", str(tmp_path / "out"),
         "--corpus", str(corpus)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "gsm8k\titems 1319" in done.stdout
