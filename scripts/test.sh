#!/usr/bin/env bash
# The whole test suite: install what is needed into .venv/, lint, build the docs strictly, then run every test against a real
# redis-server that the tests start themselves on a free loopback port and the PostgreSQL server
# on 127.0.0.1:5432 (started, or installed from Debian's packages, when none answers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh "[dev]"
# Every command below (and every process the tests start: `mcp-runtime`, `python`) is the venv's.
export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"
# The example step plug-in (its entry points register example.* steps); tests run its steps.
uv pip install -q --python .venv/bin/python --no-deps -e examples/step-plugin
bash scripts/ensure-postgres.sh
# `install_missing PACKAGE COMMAND...`: apt-get install PACKAGE when one of its commands is missing.
install_missing() {
  local package=$1; shift
  for command in "$@"; do
    if ! command -v "$command" >/dev/null 2>&1; then
      echo "installing $package (apt-get)" >&2
      SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$package" >/dev/null
      return
    fi
  done
}
# The metrics tests scrape with a real Prometheus server and lint with promtool (Debian's).
install_missing prometheus prometheus promtool
# The dashboard's browser tests drive Debian's Chromium through Playwright (never `playwright install`).
install_missing chromium chromium
# The data-centre suite (tests/hosts) partitions hosts with nftables rules inside their namespaces.
install_missing nftables nft
# The PostgreSQL TLS tests make their CA and server certificate with openssl.
install_missing openssl openssl
python -m ruff check .
# The documentation site, strictly: a broken link or anchor, or a page missing from mkdocs.yml's nav,
# fails the suite. Built into a scratch directory (nothing is left in the checkout).
site_dir=$(mktemp -d)
NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --quiet --site-dir "$site_dir"
rm -rf "$site_dir"
python -m pytest -q -p no:cacheprovider "$@"
