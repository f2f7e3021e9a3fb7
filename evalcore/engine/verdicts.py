"""Verdicts the candidate cannot write: its program and the tests run in two processes of one jail.

A generated program is scored by running tests against it. If the tests run in the candidate's own
interpreter, the candidate can make them pass without solving anything: patch the module that
reports the result, register an exit hook that prints a later "passed" line, ``os._exit(0)`` after a
failed assertion, or return an object whose ``__eq__`` always says yes. :func:`run_tests` runs the
candidate's program in one process (the *host*) and the tests in another (the *referee*, the
jail's PID 1), which calls the candidate's functions through the jail-side protocol of
:mod:`evalcore.engine.jailside` and sees only plain values coming back. The referee alone writes
the verdict, on a descriptor the host never holds.

Separately, :func:`static_tampering` reads the completion for the moves that attack the
interpreter or the verdict (exit hooks, patched builtins or modules, frame walking, ``__eq__``
overrides, dynamic code); what it finds, and what the host itself reports after the tests, travels
with the verdict as ``tampering`` and puts the submission in the review queue. These findings
never change a verdict: a program that tampers and still fails fails; one that passes passed on
plain values.
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from evalcore.engine.sandbox import PROGRAM_DIR, SandboxUnavailable, check_limits, launch, require_jail

JAILSIDE = Path(__file__).with_name("jailside.py")
JAILWIRE = Path(__file__).with_name("jailwire.py")  # imported by jailside.py, beside it in the jail
STARTUP_SLACK = 5.0  # seconds for the jail and its two interpreters to start, beyond the tests' own limit


@dataclass(frozen=True)
class TestVerdict:
    result: str  # "passed", "timed out" or "failed: <exception>" (code_eval's strings)
    tampering: tuple[str, ...] = field(default=())
    stderr: str = ""

    @property
    def passed(self) -> bool:
        return self.result == "passed"


def run_tests(
    candidate: str, tests: str, *, timeout: float = 3.0, memory_mb: int = 2048, guard: bool = False, main: bool = True
) -> TestVerdict:
    """Run ``tests`` against ``candidate`` (a program) in a fresh jail; the referee's verdict.

    ``timeout`` bounds the candidate's start and the tests (code_eval's limit); ``guard`` applies
    code_eval's ``reliability_guard`` in both processes and swallows output, as the hub script does;
    ``main`` runs the candidate as ``__main__`` (a script) rather than in an empty namespace.
    """
    if not isinstance(candidate, str) or not isinstance(tests, str):
        raise ValueError("candidate and tests must be strings")
    check_limits(timeout, memory_mb)
    return _run(_referee_jail(), candidate, tests, float(timeout), int(memory_mb), guard, main)


def require_referee():
    """:func:`evalcore.engine.sandbox.require_jail`, plus a trial verdict from the jail's referee."""
    return _referee_jail()


@functools.lru_cache(maxsize=1)
def _referee_jail():
    """The jail, once a trial verdict came back from its referee (it needs ctypes for prctl, among others)."""
    jail = require_jail()
    trial = _run(jail, "def f():\n    return 1\n", "assert f() == 1\n", 30.0, 256, True, False)
    if not trial.passed:
        raise SandboxUnavailable(
            f"cannot run untrusted code: the jail's referee gave {trial.result!r} for a passing trial program "
            f"({trial.stderr.strip()[-300:]})"
        )
    return jail


def _run(jail, candidate: str, tests: str, timeout: float, memory_mb: int, guard: bool, main: bool) -> TestVerdict:
    files = {"jailside.py": JAILSIDE.read_text(), "jailwire.py": JAILWIRE.read_text(), "candidate.py": candidate,
             "tests.py": tests}  # fmt: skip
    args = (f"{PROGRAM_DIR}/jailside.py", "referee", repr(timeout), "1" if guard else "0", "1" if main else "0")
    done = launch(jail, files, args, timeout + 1 + STARTUP_SLACK, memory_mb)
    found = static_tampering(candidate)
    verdict = _verdict(done.stdout)
    if verdict is None:  # the referee was killed (out of time or memory): nothing passed
        return TestVerdict("timed out", tuple(found), done.stderr)
    result, reported = verdict
    if done.out_of_memory and result != "passed":
        result = "failed: out of memory"
    return TestVerdict(result, tuple(found + reported), done.stderr)


def _verdict(stdout: str) -> tuple[str, list[str]] | None:
    lines = stdout.strip().splitlines()
    if len(lines) != 1:  # the referee writes exactly one line; the host cannot write here at all
        return None
    try:
        data = json.loads(lines[0])
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("result"), str) or not isinstance(data.get("tamper"), list):
        return None
    return data["result"], [str(item)[:300] for item in data["tamper"][:20]]


_COLLECTED: ContextVar[list[str] | None] = ContextVar("podium_tampering", default=None)


@contextmanager
def collecting_tampering() -> Iterator[list[str]]:
    """Gather, in this thread's context, what :func:`report_tampering` is told while the block runs."""
    found: list[str] = []
    token = _COLLECTED.set(found)
    try:
        yield found
    finally:
        _COLLECTED.reset(token)


def report_tampering(verdicts) -> None:
    """Pass the findings of ``verdicts`` to the innermost :func:`collecting_tampering` (none: dropped)."""
    found = _COLLECTED.get()
    if found is not None:
        for verdict in verdicts:
            found.extend(item for item in verdict.tampering if item not in found)


# ---- what the completion's text shows

_EXIT_CALLS = {"os._exit", "os.abort", "os.kill", "os.killpg", "sys.exit", "signal.signal", "signal.alarm",
               "signal.setitimer", "atexit.register"}  # fmt: skip
_HOOKS = {"sys.excepthook", "sys.displayhook", "sys.unraisablehook", "sys.settrace", "sys.setprofile",
          "sys.addaudithook", "threading.excepthook", "threading.settrace", "sys.modules", "sys.meta_path",
          "sys.path_hooks", "sys._getframe", "inspect.currentframe", "inspect.stack", "gc.get_objects",
          "gc.get_referrers", "gc.get_referents"}  # fmt: skip
_NAMES = {"builtins", "__builtins__", "__builtin__", "__import__", "ctypes", "importlib", "atexit", "gc"}
_ATTRIBUTES = {"f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "__globals__", "__code__",
               "__subclasses__", "__closure__"}  # fmt: skip
_DYNAMIC = {"exec", "compile"}  # not eval: arithmetic (HumanEval/160's canonical solution) is its everyday use
_REFLECTIVE = {"setattr", "delattr", "getattr"}
_MODULE_NAMES = {"os", "sys", "builtins", "json", "signal", "subprocess", "math", "re", "io", "unittest", "random",
                 "string", "collections", "itertools", "functools", "operator", "typing"}  # fmt: skip
_COMPARISONS = {"__eq__", "__ne__", "__bool__", "__hash__", "__lt__", "__le__", "__gt__", "__ge__"}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def static_tampering(source: str) -> list[str]:
    """The moves against the interpreter or the verdict that ``source`` spells out, one line each."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: dict[str, None] = {}

    def note(text: str, node: ast.AST) -> None:
        found.setdefault(f"{text} (line {getattr(node, 'lineno', '?')})", None)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in _EXIT_CALLS:
                note(f"calls {name}", node)
            elif name in _DYNAMIC:
                note(f"calls {name}()", node)
            elif name in _REFLECTIVE and node.args and _dotted(node.args[0]).split(".")[0] in _MODULE_NAMES | _NAMES:
                note(f"calls {name}() on {_dotted(node.args[0])}", node)
        if isinstance(node, ast.Attribute | ast.Name):
            name = _dotted(node)
            if name in _HOOKS:
                note(f"uses {name}", node)
            if isinstance(node, ast.Attribute) and node.attr in _ATTRIBUTES:
                note(f"reaches into frames or code ({node.attr})", node)
            if isinstance(node, ast.Name) and node.id in _NAMES:
                note(f"uses {node.id}", node)
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in _NAMES:
                    note(f"imports {module}", node)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and _dotted(target.value).split(".")[0] in _MODULE_NAMES:
                    note(f"assigns {_dotted(target)}", node)
        if isinstance(node, ast.ClassDef):
            overridden = sorted(
                item.name for item in node.body if isinstance(item, ast.FunctionDef) and item.name in _COMPARISONS
            )
            if overridden:
                note(f"class {node.name} overrides {', '.join(overridden)}", node)
    return list(found)[:20]
