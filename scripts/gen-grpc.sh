#!/usr/bin/env bash
# Regenerates the checked-in gRPC stubs of runtime_core/providers/proto/runtime_provider.proto
# into runtime_core/providers/grpc_gen/ (needs grpcio-tools, in the [dev] extra).
set -euo pipefail
cd "$(dirname "$0")/.."
PROTO_DIR=runtime_core/providers/proto
OUT_DIR=runtime_core/providers/grpc_gen
python3 -m grpc_tools.protoc -I "$PROTO_DIR" \
  --python_out="$OUT_DIR" --pyi_out="$OUT_DIR" --grpc_python_out="$OUT_DIR" \
  "$PROTO_DIR/runtime_provider.proto"
# protoc imports the message module as a top-level module; make it a package import.
sed -i 's/^import runtime_provider_pb2 as /from runtime_core.providers.grpc_gen import runtime_provider_pb2 as /' \
  "$OUT_DIR/runtime_provider_pb2_grpc.py"
