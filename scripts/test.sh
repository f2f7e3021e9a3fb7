#!/usr/bin/env bash
# `make test`: find or start PostgreSQL, Redis and RabbitMQ, then ruff, the import-linter contracts, pytest.
# Private servers started here are stopped on exit, also when a step fails. Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
# The suite runs in PYTEST_WORKERS processes (pytest-xdist; default: one per CPU, at least 2 and at most 4),
# a whole test file to a process. Each has its own test database, Redis database and folders
# (config/settings/test.py). PYTEST_WORKERS=0 runs it in this process alone.
if [ -z "${PYTEST_WORKERS:-}" ]; then
  PYTEST_WORKERS=$(nproc 2>/dev/null || echo 2)
  [ "$PYTEST_WORKERS" -lt 2 ] && PYTEST_WORKERS=2
  [ "$PYTEST_WORKERS" -gt 4 ] && PYTEST_WORKERS=4
fi
case "$PYTEST_WORKERS" in
  ''|*[!0-9]*) echo "PYTEST_WORKERS must be a number of processes (0: no workers), not '$PYTEST_WORKERS'" >&2; exit 2 ;;
esac
if [ "${#PYTEST_WORKERS}" -gt 2 ] || [ "$PYTEST_WORKERS" -gt 16 ]; then
  echo "PYTEST_WORKERS is at most 16 (each worker takes one of Redis's 16 databases), not $PYTEST_WORKERS" >&2; exit 2
fi
source scripts/services.sh
trap stop_own_services EXIT
trap 'exit 130' INT TERM

find_or_start_services || exit 1

# Code-execution tasks (pass@k) run untrusted programs in a bubblewrap jail, and refuse to run without one.
if ! command -v bwrap >/dev/null; then
  apt_install bubblewrap || { echo "bubblewrap (bwrap) is needed for the code-execution jail" >&2; exit 1; }
fi
# The jail's seccomp filter is compiled by libseccomp (evalcore/jail/seccomp.py).
if ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
  apt_install libseccomp2 || { echo "libseccomp2 is needed for the jail's seccomp filter" >&2; exit 1; }
fi

# Browser tests drive Debian's Chromium with Playwright (never `playwright install`).
if ! command -v chromium >/dev/null; then
  apt_install chromium || { echo "chromium is needed for the browser tests" >&2; exit 1; }
fi

export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PODIUM_DATA_DIR="${PODIUM_DATA_DIR:-$(cd .. && pwd)/shared/data}"

echo "== ruff"
.venv/bin/ruff check . || exit 1
echo "== import-linter"
.venv/bin/lint-imports || exit 1
echo "== pytest ($PYTEST_WORKERS workers)"
.venv/bin/pytest -n "$PYTEST_WORKERS" --dist loadfile --durations=30 "$@"
status=$?
if [ "$status" = 5 ]; then
  echo "pytest collected no tests: failing" >&2
fi
exit "$status"
