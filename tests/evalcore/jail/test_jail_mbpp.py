"""MBPP's reference solutions pass in the jail, the seccomp filter on, both ways programs run there:
the whole program in one process (:func:`run_program`) and the referee's verdict (:func:`run_tests`).

All 974 run in ``python bench/sandbox.py --corpus mbpp``: 974/974 as one program, seccomp filter on
or off, and through the referee. Here a handful, one per standard module MBPP's solutions import, and
the three that need more than calls: MBPP/367 and /927 assign attributes to the candidate's objects in
their ``test_setup_code`` (trees of its ``Node``), MBPP/533 passes the type ``int`` to the candidate. MBPP is read from ``$PODIUM_DATA_DIR/benchmarks/mbpp/mbpp.jsonl``; without it these
tests skip, naming where the file belongs.
"""

from __future__ import annotations

import pytest

from bench.sandbox import mbpp_problems
from evalcore.jail.sandbox import run_program
from evalcore.jail.verdicts import run_tests

# math, heapq, re, collections, itertools, sys, cmath, array, bisect, datetime; 367 has test_setup_code.
CHOSEN = ("MBPP/3", "MBPP/4", "MBPP/7", "MBPP/13", "MBPP/40", "MBPP/100", "MBPP/124", "MBPP/137", "MBPP/736",
          "MBPP/910")  # fmt: skip
WITH_SETUP = "MBPP/367"
OBJECTS = ("MBPP/367", "MBPP/927", "MBPP/533")  # attributes assigned from the tests; a type passed


@pytest.fixture(scope="module")
def mbpp() -> dict[str, tuple[str, str]]:
    try:
        rows = mbpp_problems()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    return {name: (code, tests) for name, code, tests in rows}


def test_the_file_is_mbpps_full_release(mbpp):
    assert len(mbpp) == 974 and set(mbpp) == {f"MBPP/{i}" for i in range(1, 975)}


@pytest.mark.parametrize("name", [*CHOSEN, WITH_SETUP])
def test_reference_solution_passes_as_one_program(mbpp, name):
    code, tests = mbpp[name]
    result = run_program(f"{code}\n{tests}", timeout=10, memory_mb=1024)
    assert result.passed, (name, result.status, result.detail)


@pytest.mark.parametrize("name", [*CHOSEN, *OBJECTS])
def test_reference_solution_passes_the_referee(mbpp, name):
    code, tests = mbpp[name]
    verdict = run_tests(code, tests, timeout=10, memory_mb=1024)
    assert verdict.passed and not verdict.tampering, (name, verdict.result, verdict.tampering)


def test_a_wrong_solution_fails_both_ways(mbpp):
    _, tests = mbpp["MBPP/2"]
    wrong = "def similar_elements(test_tup1, test_tup2):\n    return ()\n"
    assert not run_program(f"{wrong}\n{tests}", timeout=10, memory_mb=1024).passed
    assert not run_tests(wrong, tests, timeout=10, memory_mb=1024).passed
