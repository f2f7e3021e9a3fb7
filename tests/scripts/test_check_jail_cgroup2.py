"""scripts/check-jail-cgroup2.sh boots a VM (QEMU, a Debian kernel, minutes under TCG) to run the jail under a
pure cgroup v2 tree; the suite checks its syntax and its refusals, and docs/security.md records its run."""

from __future__ import annotations

import subprocess

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "check-jail-cgroup2.sh"


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_unknown_options_are_refused():
    done = subprocess.run(["bash", str(SCRIPT), "--fast"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "usage: bash scripts/check-jail-cgroup2.sh [--probe]" in done.stderr
