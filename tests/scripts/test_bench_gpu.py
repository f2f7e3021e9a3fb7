"""bench/gpu.sh, the vLLM benches prepared for a CUDA machine, cannot run here: its syntax, its dry run
(every bench/vllm_bench.py command it would run, with its arguments checked by the bench itself) and its
refusal of unknown options are tested instead."""

from __future__ import annotations

import subprocess

from tests.conftest import REPO_ROOT, clean_env

SCRIPT = REPO_ROOT / "bench" / "gpu.sh"


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_the_dry_run_checks_the_bench_arguments_and_prints_every_command(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=clean_env(GPU_BENCH_OUT=str(tmp_path), GPU_BENCH_BATTLES="32"), timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("plan: workload all, 32 battles x 256 tokens") and "on cuda" in line for line in lines)
    runs = [line for line in lines if line.startswith("+ .venv/bin/python bench/vllm_bench.py")]
    assert [line.split("--workload ")[1].split()[0] for line in runs] == ["all", "intervals"]
    assert all(f"--out {tmp_path}/" in line for line in runs)
    assert "+ make .venv/.podium-installed .venv/.podium-vllm" in lines


def test_a_bad_batch_size_fails_the_dry_run(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=clean_env(GPU_BENCH_OUT=str(tmp_path), GPU_BENCH_BATTLES="0"), timeout=120)  # fmt: skip
    assert done.returncode != 0 and "--battles" in done.stderr


def test_unknown_options_are_refused():
    done = subprocess.run(["bash", str(SCRIPT), "--go-fast"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "usage: bash bench/gpu.sh [--dry-run]" in done.stderr


def test_an_offline_interpreter_installs_nothing(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=clean_env(GPU_BENCH_OUT=str(tmp_path), GPU_BENCH_PYTHON=".venv/bin/python"), timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not any(line.startswith("+ make ") for line in done.stdout.splitlines())
    assert "+ .venv/bin/python bench/vllm_bench.py --workload all" in done.stdout
