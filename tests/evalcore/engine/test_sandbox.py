"""Generated code runs with a time limit, a memory limit, no network and a throwaway folder."""

from __future__ import annotations

import glob
import tempfile
import time

from evalcore.engine.sandbox import humaneval_program, run_program


def test_passing_and_failing_programs():
    assert run_program("assert 1 + 1 == 2").passed
    failed = run_program("assert 1 + 1 == 3, 'wrong sum'")
    assert not failed.passed and failed.status == "failed" and "wrong sum" in failed.detail


def test_infinite_loop_is_killed_at_the_time_limit():
    started = time.monotonic()
    result = run_program("while True:\n    pass", timeout=1.0)
    assert result.status == "timeout" and time.monotonic() - started < 10


def test_memory_limit():
    result = run_program("x = bytearray(2 * 1024 ** 3)\nprint(len(x))", memory_mb=256)
    assert not result.passed and "MemoryError" in result.detail


def test_no_network_and_no_processes():
    net = run_program("import socket\nsocket.create_connection(('127.0.0.1', 80), timeout=1)")
    assert not net.passed and ("PermissionError" in net.detail or "OSError" in net.detail)
    spawn = run_program("import os\nos.system('echo hi')")
    assert not spawn.passed


def test_throwaway_folder_is_removed():
    before = set(glob.glob(f"{tempfile.gettempdir()}/podium-sandbox-*"))
    assert run_program("open('left_behind.txt', 'w').write('x')").passed
    assert set(glob.glob(f"{tempfile.gettempdir()}/podium-sandbox-*")) == before


def test_humaneval_program_runs_the_checks():
    prompt = 'def add(a, b):\n    """Add two numbers."""\n'
    test = "def check(candidate):\n    assert candidate(2, 3) == 5\n"
    assert run_program(humaneval_program(prompt, "    return a + b\n", test, "add")).passed
    assert not run_program(humaneval_program(prompt, "    return a - b\n", test, "add")).passed
