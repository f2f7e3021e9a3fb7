"""bench/grade_intervals.py --quick runs end to end: a row per grade distribution and number of questions,
Podium's interval beside the percentile bootstrap it replaced."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO_ROOT, clean_env

SCRIPT = REPO_ROOT / "bench" / "grade_intervals.py"
ROW = re.compile(r"^(spread|top-heavy|narrow)\s+(\d+)\s+(0\.\d{3}|1\.000) \(0\.\d{3}\), [\d.]+\s+(0\.\d{3}|1\.000) \(0\.\d{3}\), [\d.]+$")


def test_quick_run_prints_every_cell(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick"], cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env(), timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [ROW.match(line) for line in done.stdout.splitlines()]
    cells = {(m[1], int(m[2])) for m in rows if m}
    assert cells == {(d, k) for d in ("spread", "top-heavy", "narrow") for k in (2, 3, 4, 8, 10, 16, 80)}
    assert "100 data sets per cell" in done.stdout


def test_bad_options_are_refused_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--reps", "0"], cwd=tmp_path, capture_output=True,
                          text=True, env=clean_env(), timeout=60)  # fmt: skip
    assert done.returncode == 2 and "--reps must be at least 1" in done.stderr.strip().splitlines()[-1]
    assert done.stdout == ""
