#!/usr/bin/env bash
# The main job: install into .venv/, then start the MCP server on the embedded default (a private
# redis-server + SQLite under .mcp-runtime/) as a stdio child of the example client, and
# run it end to end: submit the RAG pipeline, drain, poll run.status until Completed,
# print the result and the ledger.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
exec .venv/bin/python examples/clients/stdio_client.py --data-dir .mcp-runtime "$@"
