"""bench/intervals.py --quick runs end to end: every kind simulated, the summary printed, copies agreeing with the module."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT, clean_env

SCRIPT = REPO_ROOT / "bench" / "intervals.py"
KINDS = (
    "proportion: mid-p",
    "proportion: Wilson (peer)",
    "proportion: plug-in normal, lm-eval (peer)",
    "bounded mean: mid-p-effective",
    "bounded mean: Student t (peer)",
    "clustered: mid-p-effective with clusters",
    "clustered: mid-p ignoring clusters (peer)",
    "pooled: micro average",
    "pooled: macro average",
    "pooled: macro, pooled only (peer)",
    "mover: raw board average",
    "mover: normalised board average",
    "ratio: delta-t",
    "ratio: percentile bootstrap (peer)",
)


def test_quick_run_prints_a_summary_line_per_kind(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick"], cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env(), timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    summary = [line for line in lines if line.startswith("summary ")]
    assert len(summary) == len(KINDS)
    for kind, line in zip(KINDS, summary):
        assert line.startswith(f"summary {kind}: n>=10 min 0.")
        assert "all sizes min " in line and "outside [0.93, 0.975] at n>=10: " in line and "; below 0.90: " in line
    assert "copies agree with evalcore.stats.estimates on every checked data set" in done.stdout
    # the exact proportion coverage is deterministic: mid-p's worst cell over the grid at n >= 10
    assert "summary proportion: mid-p: n>=10 min 0.929 " in done.stdout


def test_bad_options_are_refused_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "0"], cwd=tmp_path, capture_output=True,
                          text=True, env=clean_env(), timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "--rounds must be at least 1, not 0" in done.stderr.strip().splitlines()[-1]
    assert done.stdout == ""
