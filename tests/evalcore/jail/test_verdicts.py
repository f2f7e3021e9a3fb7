"""The referee's verdicts: HumanEval parity, the value codec against hostile messages, what the
completion's text gives away, and where the jail's cgroups come from."""

from __future__ import annotations

import logging
import math
import os

import pytest

from evalcore.jail import jail_cgroup, jailwire, sandbox
from evalcore.jail.jail_cgroup import CgroupUnavailable, find_root
from evalcore.jail.sandbox import SandboxUnavailable, run_program
from evalcore.jail.verdicts import run_tests, static_tampering
from tests.evalcore.jail.test_sandbox import humaneval_problems

# One in eight HumanEval problems (all 164 run in bench/sandbox.py: 164/164 pass, none flagged).
SAMPLE = humaneval_problems()[::8]


@pytest.mark.parametrize("problem", SAMPLE, ids=[p["task_id"] for p in SAMPLE])
def test_canonical_humaneval_solutions_pass_unflagged_and_wrong_ones_fail(problem):
    candidate, tests = problem["prompt"] + problem["canonical_solution"], f"{problem['test']}\ncheck({problem['entry_point']})\n"
    verdict = run_tests(candidate, tests, timeout=10)
    assert verdict.passed and verdict.tampering == (), verdict
    assert not run_tests(problem["prompt"] + "    return None\n", tests, timeout=10).passed


VALUES = [None, True, False, 0, -1, 10**400, 1.5, -0.0, math.inf, "text \udc80 \u2603", b"\x00\xff",
          bytearray(b"ab"), [1, [2, [3]]], (1, "a"), {1, 2}, frozenset({3}), {"k": (1, 2), 3: None}, 1 - 2j,
          range(1, 10, 3)]  # fmt: skip


def _refuse(value):
    raise TypeError(type(value).__name__)


def test_plain_values_round_trip_exactly():
    for value in VALUES:
        again = jailwire.decode(jailwire.encode(value, _refuse), _refuse)
        assert again == value and type(again) is type(value), value
    nan = jailwire.decode(jailwire.encode(math.nan, _refuse), _refuse)
    assert math.isnan(nan)
    assert math.copysign(1, jailwire.decode(jailwire.encode(-0.0, _refuse), _refuse)) == -1


def test_values_that_are_not_plain_become_references():
    class Sneaky(int):
        def __eq__(self, other):
            return True

    refs = []
    encoded = jailwire.encode([Sneaky(5), object()], lambda v: refs.append(v) or {"r": len(refs) - 1})
    assert encoded == {"l": [{"i": "0x5"}, {"r": 0}]}  # the int subclass crosses as a plain int
    deep: list = []
    for _ in range(jailwire.MAX_DEPTH + 5):
        deep = [deep]
    assert "r" in str(jailwire.encode(deep, lambda v: {"r": 0}))  # too deep: a reference, not a crash


@pytest.mark.parametrize(
    "message",
    [{"zz": 1}, {"i": 5}, {"i": "zz"}, {"f": 1}, {"l": "abc"}, {"d": [[1]]}, {"r": True}, {"i": "1", "f": "1"},
     [1, 2], 3.5, {"rg": ["0x1"]}, {"c": ["1"]}],
)  # fmt: skip
def test_malformed_values_are_refused(message):
    with pytest.raises((jailwire.ProtocolError, ValueError, TypeError)):
        jailwire.decode(message, lambda ref: pytest.fail("no reference expected"))


def test_oversized_or_broken_frames_are_refused():
    read, write = os.pipe()
    try:
        os.write(write, (jailwire.MAX_MESSAGE + 1).to_bytes(4, "big"))
        with pytest.raises(jailwire.ProtocolError, match="over the"):
            jailwire.receive(read)
        os.write(write, (3).to_bytes(4, "big") + b"{{{")
        with pytest.raises(jailwire.ProtocolError, match="not JSON"):
            jailwire.receive(read)
        os.write(write, (10).to_bytes(4, "big") + b"12")
        os.close(write)
        write = -1
        with pytest.raises(jailwire.HostGone):
            jailwire.receive(read)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_static_findings_name_the_move_and_the_line():
    found = static_tampering(
        "import sys, os, builtins\n"
        "sys.excepthook = None\n"
        "os._exit(0)\n"
        "setattr(builtins, 'len', None)\n"
        "class A:\n    def __eq__(self, o):\n        return True\n"
        "f = lambda: (yield).gi_frame.f_back\n"
        "exec('1')\n"
    )
    text = " | ".join(found)
    for expected in ("uses sys.excepthook (line 2)", "calls os._exit (line 3)", "calls setattr() on builtins (line 4)",
                     "class A overrides __eq__ (line 5)", "reaches into frames or code (f_back) (line 8)",
                     "calls exec() (line 9)", "imports builtins (line 1)"):  # fmt: skip
        assert expected in text, (expected, text)
    assert static_tampering("def f(:\n") == [] and static_tampering("x = eval('1 + 2')\n") == []


def test_cgroup_setting_is_checked(monkeypatch):
    with pytest.raises(CgroupUnavailable, match="absolute path"):
        find_root("jails")
    with pytest.raises(CgroupUnavailable, match="no-such-folder"):
        find_root("/sys/fs/cgroup/no-such-folder")
    assert find_root("off") is None
    root = find_root()  # the worker's own setting: auto as root here, a delegated folder in the compose images
    cgroup = root.create(64 << 20, 4)
    try:
        assert os.path.isdir(cgroup.folders[0]) and cgroup.pids() == []
    finally:
        cgroup.remove()
    assert not os.path.exists(cgroup.folders[0])
    monkeypatch.setattr(jail_cgroup, "_mounts", lambda: {})
    with pytest.raises(CgroupUnavailable, match="PODIUM_JAIL_CGROUP=off runs jails with per-process limits only"):
        find_root("auto")


def test_without_a_cgroup_the_jail_says_which_guarantee_is_lost(monkeypatch, caplog):
    setting = os.environ.get("PODIUM_JAIL_CGROUP")  # auto here; a delegated folder under scripts/jail-cgroup.sh
    monkeypatch.setenv("PODIUM_JAIL_CGROUP", "jails")
    sandbox.require_jail.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="must be auto, off or an absolute path"):
            run_program("print(1)")
        monkeypatch.setenv("PODIUM_JAIL_CGROUP", "off")
        sandbox.require_jail.cache_clear()
        with caplog.at_level(logging.WARNING, logger="evalcore.jail.sandbox"):
            result = run_program("print(1)")
        assert result.passed and result.limits == "per-process (PODIUM_JAIL_CGROUP=off)"
        assert "jail without a memory cgroup" in caplog.text and "may hold more" in caplog.text
        assert sandbox.jail_protocol(sandbox.require_jail())["memory_limit"].startswith("per-process")
    finally:
        if setting is None:
            monkeypatch.delenv("PODIUM_JAIL_CGROUP")
        else:
            monkeypatch.setenv("PODIUM_JAIL_CGROUP", setting)
        sandbox.require_jail.cache_clear()
    assert run_program("print(1)").limits.startswith("cgroup v")
