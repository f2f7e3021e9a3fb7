#!/usr/bin/env bash
# The vLLM benches on a CUDA GPU machine, as one prepared script (docs/PERFORMANCE.md, "vLLM").
#   bash bench/gpu.sh             # installs CUDA vLLM into .venv, runs the benches, writes bench/out/gpu/
#   bash bench/gpu.sh --dry-run   # checks the machine-independent parts and prints the commands only
# It runs bench/vllm_bench.py on the GPU: the arena's concurrent battles against the hf backend, the judges'
# audit workload against a plain transformers loop, and Podium's backend against raw vLLM offline
# throughput on the same prompts (goal: within 10%). Results: bench/out/gpu/*.json and the log.
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
PY=.venv/bin/python
run() {
  echo "+ $*"
  if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}
if [ "$DRY_RUN" = 0 ]; then
  command -v nvidia-smi >/dev/null && nvidia-smi -L || { echo "bench/gpu.sh: no NVIDIA GPU answers (nvidia-smi -L)" >&2; exit 1; }
fi
run make .venv/.podium-installed .venv/.podium-vllm   # scripts/install_vllm.sh picks the CUDA build here
run "$PY" scripts/fetch_smollm2.py
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
args=(--device cuda --battles "$BATTLES" --tokens 256 --pairs 100)
if [ "$DRY_RUN" = 1 ]; then
  # The arguments are checked by the bench itself, without loading anything.
  "$PY" bench/vllm_bench.py --workload all "${args[@]}" --out "$OUT_DIR/vllm.json" --plan
fi
run "$PY" bench/vllm_bench.py --workload arena "${args[@]}" --out "$OUT_DIR/arena.json"
run "$PY" bench/vllm_bench.py --workload judges "${args[@]}" --out "$OUT_DIR/judges.json"
run "$PY" bench/vllm_bench.py --workload raw "${args[@]}" --out "$OUT_DIR/raw.json"
echo "bench/gpu.sh: results in $OUT_DIR"
