"""scripts/test.sh (`make test`) refuses a malformed PYTEST_WORKERS at once, before it starts or installs
any service."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import REPO_ROOT, clean_env


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "PYTEST_WORKERS must be a number of processes (0: no workers), not 'abc'"),
        ("-1", "must be a number of processes"),
        ("1.5", "must be a number of processes"),
        ("2; touch hacked", "must be a number of processes"),
        ("$(touch hacked)", "must be a number of processes"),
        (" 2", "must be a number of processes"),
        ("17", "PYTEST_WORKERS is at most 16 (each worker takes one of Redis's 16 databases), not 17"),
        ("99999999999999999999", "PYTEST_WORKERS is at most 16"),
    ],
)
def test_a_malformed_worker_count_is_refused_before_anything_starts(tmp_path, value, message):
    env = clean_env(PYTEST_WORKERS=value, TEST_DATABASE_URL="postgres://nobody@127.0.0.1:1/none")
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "test.sh")], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "[services]" not in result.stdout + result.stderr  # nothing was looked for or started
    assert not (tmp_path / "hacked").exists() and not (REPO_ROOT / "hacked").exists()
