"""The deterministic distributed AI-workflow runtime.

Owns pipelines, the Redis-backed DAG engine, control, concurrency, queueing, runtime
instances, providers, durable storage and audit. Must not import anything from `mcp` or
`mcp_runtime`: the MCP control plane sits on top of this package, never inside it.
"""
