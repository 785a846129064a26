#!/usr/bin/env bash
# The whole test suite: install what is needed, lint, then run every test against a real
# redis-server that the tests start themselves on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh "[dev]"
python3 -m ruff check .
python3 -m pytest -q -p no:cacheprovider "$@"
