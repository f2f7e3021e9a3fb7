"""Which of the candidate's names the tests may see, worked out on the worker before a jail starts.

The scoring referee runs the tests in globals it builds itself (:mod:`evalcore.jail.jailside`): real
builtins, real modules, the task's own helpers, and only the candidate names this plan lists, each a
stand-in for the candidate's object. A completion that rebinds ``abs`` or ``math``, or forges more
names in its answer, changes nothing the tests compute.

Where the task's protocol names what the tests call (Podium's pass@k: the entry point, with the
prompt as trusted setup), the plan is that list. Where it does not (``code_eval``, whose references
are bare test programs), the plan is what the tests use and never define: the free global names of
their text (``symtable``), less builtins, dunder names and whatever the setup defines. A name the
tests reach only dynamically (``globals()["f"]``, ``eval("f")``) is not in the plan and fails.
"""

from __future__ import annotations

import builtins
import symtable
from dataclasses import dataclass, field

MAX_NAMES = 1000


@dataclass(frozen=True)
class TestPlan:
    """What the referee is told, besides the tests' text.

    ``names``: the candidate's names bound in the tests' globals; ``builtins_used``: builtins the tests
    use (a candidate that rebinds one is reported: the tests use the real one); ``setup``: trusted code
    (the task's own, never the candidate's) the referee runs in the tests' globals first, and
    ``setup_names`` what it defines.
    """

    names: tuple[str, ...]
    builtins_used: tuple[str, ...] = field(default=())
    setup: str = ""
    setup_names: tuple[str, ...] = field(default=())

    __test__ = False  # not a pytest class, whatever imports it


def _usable(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not name.startswith("__")


def global_names(source: str) -> tuple[set[str], set[str]]:
    """(global names ``source`` uses, global names it binds), from its symbol tables; empty when it does
    not compile (the referee then reports the tests' own syntax error)."""
    try:
        top = symtable.symtable(source, "<tests>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set(), set()
    used: set[str] = set()
    bound: set[str] = set()
    tables = [top]
    while tables:
        table = tables.pop()
        for symbol in table.get_symbols():
            name = symbol.get_name()
            if table is top:
                if symbol.is_referenced():
                    used.add(name)
                if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace():
                    bound.add(name)
            elif symbol.is_global():
                if symbol.is_referenced():
                    used.add(name)
                if symbol.is_declared_global() and symbol.is_assigned():
                    bound.add(name)
        tables.extend(table.get_children())
    return used, bound


def plan_tests(tests: str, *, names=None, setup: str = "") -> TestPlan:
    """The plan for ``tests``: ``names`` as the protocol gives them, or worked out from the tests' text."""
    if not isinstance(tests, str) or not isinstance(setup, str):
        raise ValueError("tests and setup must be strings")
    if setup and names is None:
        raise ValueError(
            "a setup (the task's own code, run before the tests) needs the names the tests take from the candidate "
            "(the pass@k entry's entry_point): else the setup's stubs would stand in for the candidate's functions"
        )
    used, bound = global_names(tests)
    _, setup_bound = global_names(setup) if setup else (set(), set())
    free = used - bound
    builtin = set(dir(builtins))
    if names is None:
        chosen = sorted(n for n in free - builtin if _usable(n))
    else:
        if isinstance(names, str) or not all(_usable(n) for n in names):
            raise ValueError(
                f"the names the tests take from the candidate must be identifiers not starting with '__', "
                f"not {names!r}"
            )
        chosen = sorted(set(names))
    if len(chosen) > MAX_NAMES:
        raise ValueError(f"the tests take {len(chosen)} names from the candidate; at most {MAX_NAMES}")
    return TestPlan(
        names=tuple(chosen),
        builtins_used=tuple(sorted(n for n in free & builtin if n not in chosen and _usable(n))),
        setup=setup,
        setup_names=tuple(sorted(n for n in setup_bound if _usable(n) and n not in chosen)),
    )
