"""Verdicts the candidate cannot write: its program and the tests run in two processes of one jail.

A generated program is scored by running tests against it. If the tests run in the candidate's own
interpreter, the candidate can make them pass without solving anything: patch the module that
reports the result, register an exit hook that prints a later "passed" line, ``os._exit(0)`` after a
failed assertion, or return an object whose ``__eq__`` always says yes. :func:`run_tests` runs the
candidate's program in one process (the *host*) and the tests in another (the *referee*, the
jail's PID 1), which calls the candidate's functions through the jail-side protocol of
:mod:`evalcore.jail.jailside` and sees only plain values coming back. The referee alone writes
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

from evalcore.jail.sandbox import PROGRAM_DIR, SandboxUnavailable, check_limits, launch, require_jail
from evalcore.jail.testplan import TestPlan, plan_tests

# What the scoring jail holds under /program, besides candidate.py: the referee and host, and the modules
# jailside.py imports from beside it. Never the tests: they come in on a descriptor.
JAIL_FILES = {name: Path(__file__).with_name(name) for name in ("jailside.py", "jailwire.py", "jailaudit.py")}
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
    candidate: str,
    tests: str,
    *,
    timeout: float = 3.0,
    memory_mb: int = 2048,
    guard: bool = False,
    main: bool = True,
    names=None,
    setup: str = "",
) -> TestVerdict:
    """Run ``tests`` against ``candidate`` (a program) in a fresh jail; the referee's verdict.

    ``timeout`` bounds the candidate's start and the tests (code_eval's limit); ``guard`` applies
    code_eval's ``reliability_guard`` in both processes and swallows output, as the hub script does;
    ``main`` runs the candidate as ``__main__`` (a script) rather than in an empty namespace.
    ``names``: the candidate's names the tests call, as the task's protocol gives them (the entry
    point); None works them out from the tests (:func:`evalcore.jail.testplan.plan_tests`).
    ``setup``: the task's own code (a HumanEval prompt's helpers), run by the referee in the tests'
    globals; what it defines never comes from the candidate. The tests and the setup reach the jail
    on a descriptor that the referee reads and closes before the candidate's process exists.
    """
    if not isinstance(candidate, str) or not isinstance(tests, str):
        raise ValueError("candidate and tests must be strings")
    check_limits(timeout, memory_mb)
    plan = plan_tests(tests, names=names, setup=setup)
    return _run(_referee_jail(), candidate, tests, plan, float(timeout), int(memory_mb), guard, main)


def require_referee():
    """:func:`evalcore.jail.sandbox.require_jail`, plus a trial verdict from the jail's referee."""
    return _referee_jail()


@functools.lru_cache(maxsize=1)
def _referee_jail():
    """The jail, once a trial verdict came back from its referee (it needs ctypes for prctl, among others)."""
    jail = require_jail()
    tests = "assert f() == 1\n"
    trial = _run(jail, "def f():\n    return 1\n", tests, plan_tests(tests), 30.0, 256, True, False)
    if not trial.passed:
        raise SandboxUnavailable(
            f"cannot run untrusted code: the jail's referee gave {trial.result!r} for a passing trial program "
            f"({trial.stderr.strip()[-300:]})"
        )
    return jail


def _run(jail, candidate: str, tests: str, plan: TestPlan, timeout: float, memory_mb: int, guard: bool,
         main: bool) -> TestVerdict:  # fmt: skip
    files = {name: path.read_text() for name, path in JAIL_FILES.items()}
    files["candidate.py"] = candidate
    spec = {"tests": tests, "setup": plan.setup, "names": list(plan.names), "builtins_used": list(plan.builtins_used)}
    args = (f"{PROGRAM_DIR}/jailside.py", "referee", repr(timeout), "1" if guard else "0", "1" if main else "0")
    hidden = json.dumps(spec, ensure_ascii=False).encode("utf-8", "replace")
    done = launch(jail, files, args, timeout + 1 + STARTUP_SLACK, memory_mb, hidden=hidden)
    found = static_tampering(candidate, plan)
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


_HIDDEN_TEXT = ("/program", "tests.py", "/proc/1/")  # the tests were once a file; the referee is PID 1


def _module_bindings(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(name, statement) for every module-level binding, in order, through if/try/with/for blocks."""
    found: list[tuple[str, ast.AST]] = []

    def targets(node: ast.AST, statement: ast.AST) -> None:
        for part in ast.walk(node):
            if isinstance(part, ast.Name):
                found.append((part.id, statement))

    def visit(body: list[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found.append((statement.name, statement))
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    targets(target, statement)
            elif isinstance(statement, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor):
                targets(statement.target, statement)
            elif isinstance(statement, ast.Import | ast.ImportFrom):
                for alias in statement.names:
                    if alias.name != "*":
                        found.append(((alias.asname or alias.name).split(".")[0], statement))
            elif isinstance(statement, ast.With | ast.AsyncWith):
                for item in statement.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars, statement)
            for block in ("body", "orelse", "finalbody"):
                if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    visit(getattr(statement, block, None) or [])
            for handler in getattr(statement, "handlers", None) or []:
                visit(handler.body)

    visit(tree.body)
    return found


def _stub(node: ast.AST) -> bool:
    """A definition with no behaviour: a docstring, ``pass`` or ``...`` only (a prompt's signature)."""
    body = getattr(node, "body", None)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not body:
        return False
    return all(isinstance(s, ast.Pass) or isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in body)


def _bending(tree: ast.Module, plan: TestPlan) -> list[tuple[str, ast.AST]]:
    """Module-level moves against what the tests compute: a builtin they use rebound, or a function they
    call (or the task defines for them) defined again over a real one with other code."""
    found = []
    bindings = _module_bindings(tree)
    earlier: dict[str, list[ast.AST]] = {}
    called = set(plan.names) | set(plan.setup_names)
    for name, statement in bindings:
        if name in plan.builtins_used:
            found.append((f"rebinds the builtin {name}, which the tests use", statement))
        if name in called:
            for before in earlier.get(name, []):
                real = isinstance(before, ast.FunctionDef | ast.AsyncFunctionDef) and not _stub(before)
                if real and ast.dump(before) != ast.dump(statement):
                    found.append((f"redefines {name}, which the tests call", statement))
                    break
        earlier.setdefault(name, []).append(statement)
    return found


def static_tampering(source: str, plan: TestPlan | None = None) -> list[str]:
    """The moves against the interpreter, the verdict or the tests that ``source`` spells out, one line each.

    With the tests' ``plan``, also the moves against what the tests compute: rebinding a builtin they
    use, redefining a function they call.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: dict[str, None] = {}

    def note(text: str, node: ast.AST) -> None:
        found.setdefault(f"{text} (line {getattr(node, 'lineno', '?')})", None)

    if plan is not None:
        for text, node in _bending(tree, plan):
            note(text, node)

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
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            hidden = [place for place in _HIDDEN_TEXT if place in text]
            if hidden:
                note(f"names the jail's hidden files ({hidden[0]!r})", node)
        if isinstance(node, ast.ClassDef):
            overridden = sorted(
                item.name for item in node.body if isinstance(item, ast.FunctionDef) and item.name in _COMPARISONS
            )
            if overridden:
                note(f"class {node.name} overrides {', '.join(overridden)}", node)
    return list(found)[:20]
