"""Generated gRPC stubs of `../proto/runtime_provider.proto`; regenerate with scripts/gen-grpc.sh."""
