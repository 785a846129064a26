"""Run the RAG demo against a running `mcp-runtime serve --transport http` with a bearer token.

    mcp-runtime serve --transport http --config examples/config/principals.json &
    python examples/clients/http_client.py --token demo-admin-token

The token can also come from the MCP_RUNTIME_TOKEN environment variable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import httpx2
from demo_flow import DemoFailed, innermost, run_rag_demo, tasks_extension
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("MCP_RUNTIME_URL", "http://127.0.0.1:8765/mcp"))
    parser.add_argument("--token", default=os.environ.get("MCP_RUNTIME_TOKEN"))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for completion")
    args = parser.parse_args()
    if not args.token:
        parser.error("give --token or set MCP_RUNTIME_TOKEN")
    headers = {"Authorization": f"Bearer {args.token}"}
    code = 1
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
            transport = streamable_http_client(args.url, http_client=http)
            async with Client(transport, extensions=[tasks_extension(args.timeout)]) as client:
                code = await run_rag_demo(client, timeout_s=args.timeout)
    except* DemoFailed as failed:
        print(innermost(failed), file=sys.stderr)
    except* MCPError:
        print("the server refused the session: is the token right (HTTP 401)?", file=sys.stderr)
        code = 2
    return code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
