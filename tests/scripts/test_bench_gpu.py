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


def test_the_gpu_run_keeps_one_process(tmp_path):
    """On a GPU both engines start once (the lease's minutes); on CPU the bench runs each side alone."""
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=clean_env(GPU_BENCH_OUT=str(tmp_path)), timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert any("plan: workload all" in line and "one process" in line for line in done.stdout.splitlines())


BENCH = REPO_ROOT / "bench" / "vllm_bench.py"


def plan(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "python"), str(BENCH), "--plan", *argv], cwd=REPO_ROOT,
                          capture_output=True, text=True, env=clean_env(), timeout=60)  # fmt: skip


def test_the_cpu_bench_runs_each_side_alone_by_default():
    done = plan("--workload", "judges", "--repeat", "3", "--preload", "vllm")
    assert done.returncode == 0, done.stderr
    assert "separate processes x 3, preload vllm" in done.stdout


def test_the_cpu_bench_refuses_options_it_cannot_honour():
    for argv, says in ((("--repeat", "0"), "--repeat"), (("--workload", "intervals", "--repeat", "2"), "separate processes"),
                       (("--processes", "one", "--preload", "vllm"), "separate processes"),
                       (("--preload", "all"), "invalid choice"), (("--role", "gpu"), "invalid choice")):  # fmt: skip
        done = plan(*argv)
        assert done.returncode == 2 and says in done.stderr, (argv, done.stderr)
