"""The fuzz tests draw the same examples whatever ran before them in the process (pytest-xdist hands
files to workers in a different order on every run): tests/fuzz/conftest.py imports the whole project
and then keeps hypothesis's constants fixed."""

from __future__ import annotations

import importlib.util
import sys

from hypothesis.internal.conjecture import providers

from tests.fuzz.conftest import FROZEN, IMPORT_FAILURES

PROJECT_LITERAL = "smollm2-judge"  # leaderboard/management/commands/demo_judge.py: no fuzz test imports it


def test_every_project_module_imports():
    assert IMPORT_FAILURES == []


def test_a_module_imported_later_adds_no_constants(tmp_path):
    """Task code a test loads from its temporary folder (as evalcore's ``!function`` loader does) stays
    in ``sys.modules``; hypothesis would otherwise draw its string literals in the tests after it."""
    assert FROZEN, "this hypothesis keeps its constants elsewhere: fix tests/fuzz/conftest.py"
    literal = "podium-late-c0nst"  # hypothesis keeps string literals of at most 20 characters
    path = tmp_path / "utils.py"
    path.write_text(f"VALUE = {literal!r}\n")
    name = "podium_fuzz_late_module"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        constants = providers._get_local_constants()
        assert literal not in constants.set_for_type("string")
    finally:
        sys.modules.pop(name, None)
    # The freeze kept the project's own constants: a literal of a project module is among them.
    assert PROJECT_LITERAL in constants.set_for_type("string")
