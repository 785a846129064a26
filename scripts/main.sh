#!/usr/bin/env bash
# The main job: install, start the embedded default (private redis-server + data dir) and
# run the example RAG pipeline to completion with 4 workers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
exec mcp-runtime run examples/pipelines/rag-final-test.json --input '{"candidateId":"c-1","jobId":"j-1"}' "$@"
