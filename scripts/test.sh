#!/usr/bin/env bash
# The whole test suite: install what is needed, lint, then run every test against a real
# redis-server that the tests start themselves on a free loopback port and the PostgreSQL server
# on 127.0.0.1:5432 (started, or installed from Debian's packages, when none answers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh "[dev]"
bash scripts/ensure-postgres.sh
python3 -m ruff check .
python3 -m pytest -q -p no:cacheprovider "$@"
