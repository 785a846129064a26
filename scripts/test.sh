#!/usr/bin/env bash
# The whole test suite: install what is needed, lint, then run every test against a real
# redis-server that the tests start themselves on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh "[dev]"
# The example step plug-in (its entry points register example.* steps); tests run its steps.
python3 -m pip install -q --disable-pip-version-check --no-deps -e examples/step-plugin 2>&1 \
  | grep -v -E "^WARNING|Running pip as the 'root'" || true
python3 -m ruff check .
python3 -m pytest -q -p no:cacheprovider "$@"
