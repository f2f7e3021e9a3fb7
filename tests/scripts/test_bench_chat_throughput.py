"""bench/chat_throughput.py refuses bad options in one line before it starts a server or reads a task."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, clean_env

SCRIPT = REPO_ROOT / "bench" / "chat_throughput.py"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--server-backend", "gpu"], "--server-backend must be one of hf, vllm, not 'gpu'"),
        (["--server-backend", ""], "--server-backend must be one of hf, vllm, not ''"),
        (["--server-backend", "vllm;rm -rf /"], "--server-backend must be one of hf, vllm"),
        (["--no-prefix-cache"], "--no-prefix-cache is for --server-backend vllm"),
        (["--no-prefix-cache", "--server-backend", "hf"], "--no-prefix-cache is for --server-backend vllm"),
        (["--docs", "0"], "--docs must be at least 1, not 0"),
        (["--repeat", "-1"], "--repeat must be at least 1, not -1"),
        (["--concurrency", "0"], "--concurrency must be at least 1, not 0"),
        (["--threads", "-3"], "--threads must be at least 1, not -3"),
        (["--max-gen-toks", "0"], "--max-gen-toks must be at least 1, not 0"),
        (["--docs", "eight"], "argument --docs: invalid int value: 'eight'"),
        (["--task", "mmlu"], "argument --task: invalid choice: 'mmlu'"),
    ],
)
def test_bad_options_are_refused_in_one_line(options, message, tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), *options], cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env(), timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert message in done.stderr.strip().splitlines()[-1]
    assert done.stdout == ""  # nothing ran
