#!/usr/bin/env bash
# Installs what the project needs on a fresh machine: redis-server (apt) and the package, into the
# project-local virtual environment `.venv/` (created when missing; `uv` does the installing, so a
# second run takes a second). Nothing goes into the interpreter's global site-packages.
# Usage: bash scripts/ensure-deps.sh [pip extras, e.g. "[dev]"]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server (apt-get)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  echo "creating the virtual environment .venv/" >&2
  python3 -m venv .venv
fi
if [ ! -x .venv/bin/uv ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check uv 2>&1 | grep -v -E "^WARNING" || true
fi
.venv/bin/uv pip install -q --python .venv/bin/python -e ".${1:-}"
.venv/bin/python -c "import runtime_core, mcp_runtime" # fail loudly if the install did not work
# Byte-compile the environment and the checkout once (up-to-date files are skipped): with
# PYTHONDONTWRITEBYTECODE set, every process would otherwise compile what it imports at each start
# (about 2 s of CPU per `mcp-runtime` process).
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
.venv/bin/python -m compileall -q -j0 "$site" mcp_runtime runtime_core >/dev/null 2>&1 || true
