#!/usr/bin/env bash
# The vLLM benches on a CUDA GPU machine, as one prepared script (docs/PERFORMANCE.md, "vLLM").
#   bash bench/gpu.sh             # installs CUDA vLLM into .venv, runs the benches, writes bench/out/gpu/
#   bash bench/gpu.sh --dry-run   # checks the machine-independent parts and prints the commands only
#   GPU_BENCH_PYTHON=python3 bash bench/gpu.sh   # a machine without a registry: an interpreter that
#       already has CUDA torch and vLLM (and the project's own needs); nothing is installed
# It runs bench/vllm_bench.py on the GPU: the arena's concurrent battles against the hf backend, the judges'
# audit workload against a plain transformers loop, and Podium's backend against raw vLLM offline
# throughput on the same prompts (goal: within 10%), in one process (one engine start); then the same
# battles streamed with stream_interval 1 and 8 against raw vLLM. Results: bench/out/gpu/vllm.json and
# intervals.json. GPU_BENCH_BATTLES (64) sets the concurrent battles.
set -euo pipefail
cd "$(dirname "$0")/.."
DRY_RUN=0
case "${1:-}" in
  "") ;;
  --dry-run) DRY_RUN=1 ;;
  *) echo "usage: bash bench/gpu.sh [--dry-run]" >&2; exit 2 ;;
esac
OUT_DIR="${GPU_BENCH_OUT:-bench/out/gpu}"
BATTLES="${GPU_BENCH_BATTLES:-64}"
PY="${GPU_BENCH_PYTHON:-.venv/bin/python}"
run() {
  echo "+ $*"
  if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}
if [ "$DRY_RUN" = 0 ]; then
  command -v nvidia-smi >/dev/null && nvidia-smi -L || { echo "bench/gpu.sh: no NVIDIA GPU answers (nvidia-smi -L)" >&2; exit 1; }
fi
if [ -z "${GPU_BENCH_PYTHON:-}" ]; then
  run make .venv/.podium-installed .venv/.podium-vllm   # scripts/install_vllm.sh picks the CUDA build here
elif [ "$DRY_RUN" = 0 ]; then
  "$PY" -c 'import torch, vllm; assert torch.cuda.is_available(), "torch sees no GPU"; print("vllm", vllm.__version__, "torch", torch.__version__)' \
    || { echo "bench/gpu.sh: GPU_BENCH_PYTHON=$PY cannot import CUDA torch and vllm" >&2; exit 1; }
fi
run "$PY" scripts/fetch_smollm2.py
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
args=(--device cuda --battles "$BATTLES" --tokens 256 --pairs 100)
if [ "$DRY_RUN" = 1 ]; then
  # The arguments are checked by the bench itself, without loading anything.
  "$PY" bench/vllm_bench.py --workload all "${args[@]}" --processes one --out "$OUT_DIR/vllm.json" --plan
  "$PY" bench/vllm_bench.py --workload intervals "${args[@]}" --intervals 1,8 --rounds 3 --out "$OUT_DIR/intervals.json" --plan
fi
# One process (each engine starts once, which the lease's minutes need); the OpenMP threads that make the
# bench run each side alone on a CPU do not slow GPU kernels.
run "$PY" bench/vllm_bench.py --workload all "${args[@]}" --processes one --out "$OUT_DIR/vllm.json"
# Then the stream interval's cost against raw vLLM (1, the CPU default, and 8, the GPU default; two engines).
run "$PY" bench/vllm_bench.py --workload intervals "${args[@]}" --intervals 1,8 --rounds 3 --out "$OUT_DIR/intervals.json"
echo "bench/gpu.sh: results in $OUT_DIR"
