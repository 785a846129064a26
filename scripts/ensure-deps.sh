#!/usr/bin/env bash
# Installs what the project needs on a fresh machine: redis-server (apt) and the package.
# Usage: bash scripts/ensure-deps.sh [pip extras, e.g. "[dev]"]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e ".${1:-}" 2>&1 | grep -v -E "^WARNING|Running pip as the 'root'" || true
python3 -c "import runtime_core, mcp_runtime" # fail loudly if the install did not work
