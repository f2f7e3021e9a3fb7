#!/usr/bin/env bash
# Prints the LD_PRELOAD a vLLM worker on CPU starts with: tcmalloc first, then whatever $LD_PRELOAD
# already holds. vLLM's CPU guide asks for it; vLLM preloads its own copy only into engine processes it
# starts itself, and Podium runs the engine inside the worker (docs/models.md, "How it runs"). Measured
# here: the judges' workload 5-8% faster and 450 MB less peak memory (docs/PERFORMANCE.md, "vLLM").
#
#   PODIUM_VLLM_TCMALLOC unset  look for Debian's libtcmalloc-minimal4 (scripts/install_vllm.sh installs it)
#   PODIUM_VLLM_TCMALLOC=0      leave LD_PRELOAD as it is
#   PODIUM_VLLM_TCMALLOC=PATH   this library (it must exist)
#
# Usage: LD_PRELOAD="$(bash scripts/vllm_preload.sh)" celery -A workers worker ...
# Without tcmalloc it prints $LD_PRELOAD unchanged and says so on stderr; exit 2 for a PATH that is not a
# file or holds a space or a colon (LD_PRELOAD's separators).
set -uo pipefail
current="${LD_PRELOAD:-}"
choice="${PODIUM_VLLM_TCMALLOC-}"
if [ "$choice" = 0 ]; then
  printf '%s\n' "$current"; exit 0
fi
lib=""
if [ -n "$choice" ]; then
  case "$choice" in
    *[[:space:]:]*) echo "podium: PODIUM_VLLM_TCMALLOC=$choice: a path in LD_PRELOAD may hold no spaces or colons" >&2; exit 2 ;;
  esac
  if [ ! -f "$choice" ]; then
    echo "podium: PODIUM_VLLM_TCMALLOC=$choice is not a file (give a tcmalloc library's path, or 0 for none)" >&2
    exit 2
  fi
  lib="$choice"
else
  for candidate in /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 /usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4 \
                   /usr/lib/libtcmalloc_minimal.so.4 /usr/lib64/libtcmalloc_minimal.so.4; do
    if [ -f "$candidate" ]; then lib="$candidate"; break; fi
  done
  if [ -z "$lib" ] && command -v ldconfig >/dev/null 2>&1; then
    lib="$(ldconfig -p 2>/dev/null | awk '/libtcmalloc_minimal\.so\.4 / {print $NF; exit}')"
  fi
fi
if [ -z "$lib" ]; then
  echo "podium: tcmalloc not found (apt-get install libtcmalloc-minimal4); the vLLM worker runs with glibc's malloc" >&2
  printf '%s\n' "$current"; exit 0
fi
case ":$current:" in
  *":$lib:"*) printf '%s\n' "$current" ;;
  *) printf '%s\n' "$lib${current:+:$current}" ;;
esac
