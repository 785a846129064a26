"""The MCP control plane of the runtime: tools, auth -> principal, RBAC, CLI, settings.

Owns everything a client talks to. Must not contain runtime behaviour: each tool
authenticates, authorizes, captures the snapshot, calls one runtime_core service and
shapes the answer.
"""
