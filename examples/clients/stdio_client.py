"""Start `mcp-runtime serve --transport stdio` as a child process and run the RAG demo over it.

    python examples/clients/stdio_client.py [--data-dir DIR] [--config FILE]

With no configuration the server uses the embedded default (a private redis-server and a
SQLite store in the data directory: --data-dir, else the server's per-user default, never the
current directory) and runs as the local admin of tenant `default`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from demo_flow import DemoFailed, innermost, run_rag_demo, tasks_extension
from mcp import Client, StdioServerParameters


def server_parameters(args: argparse.Namespace) -> StdioServerParameters:
    command = [sys.executable, "-m", "mcp_runtime.cli", "serve", "--transport", "stdio"]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    if args.config:
        command += ["--config", args.config]
    return StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", default=None, help="the server's data directory (default: per-user)")
    parser.add_argument("--config", default=None, help="server config JSON (default: embedded local admin)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for completion")
    args = parser.parse_args()
    code = 1
    try:
        async with Client(server_parameters(args), extensions=[tasks_extension(args.timeout)]) as client:
            code = await run_rag_demo(client, timeout_s=args.timeout)
    except* DemoFailed as failed:
        print(innermost(failed), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
