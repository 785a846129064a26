"""The `mcp-runtime` command line: `run` a pipeline locally, `serve` the MCP server, `hash-token`.

Owns argument parsing, progress output and exit codes. Must not contain runtime logic.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from mcp_runtime import ServeOptions, hash_token, serve
from mcp_runtime._serve import SERVICE_NAME
from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.dag import EngineEvent, ExecutionView
from runtime_core.errors import RuntimeCoreError
from runtime_core.hosting import add_process_arguments, options_from_args, run_runtime_instance_process
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.observability import configure_tracing, shutdown_tracing
from runtime_core.pipeline import parse_pipeline


class ProgressPrinter:
    """Prints one line per step transition to stderr so long runs show progress."""

    async def on_event(self, event: EngineEvent) -> None:
        if event.name.startswith("step.") and event.name != "step.claimed" and event.step_name:
            print(f"  {event.name:<24} {event.step_name}", file=sys.stderr, flush=True)


def _step_table(view: ExecutionView) -> str:
    rows = [("step", "stepKey", "status", "retries", "recoveries")]
    rows += [(s.name, s.step_key, s.status, str(s.retry_count), str(s.recovery_count)) for s in view.steps]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


async def _run_pipeline(args: argparse.Namespace) -> int:
    pipeline = parse_pipeline(await asyncio.to_thread(Path(args.pipeline).read_text, encoding="utf-8"))
    state: dict[str, Any] = json.loads(args.input)
    settings = RuntimeSettings.from_env(
        data_dir=args.data_dir, workers=args.workers, providers_file=args.providers_file
    )
    snapshot = ExecutionContextSnapshot(user_id=args.user, tenant_id=args.tenant, context_key="cli")
    traced = configure_tracing(SERVICE_NAME)
    try:
        async with RuntimeServices(settings, observer=ProgressPrinter()) as services:
            execution_id = await services.engine.create_execution(pipeline, state, snapshot)
            started = f"execution {execution_id} pipeline {pipeline.key} workers {settings.workers}"
            print(started, file=sys.stderr)
            status = await services.engine.run(execution_id, workers=settings.workers)
            view = await services.dag_store.read_execution(execution_id)
    finally:
        if traced:
            shutdown_tracing()
    assert view is not None
    print(f"ExecutionId: {execution_id}\nStatus: {status}\n")
    print(_step_table(view))
    final = view.steps[-1]
    print(f"\nFinal result ({final.name}):")
    print(json.dumps(final.result if final.result is not None else final.error, indent=2, sort_keys=True))
    return 0 if status == "Completed" else 1


async def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("casbin").setLevel(logging.WARNING)
    options = ServeOptions(
        transport=args.transport,
        host=args.host,
        port=args.port,
        config_path=args.config,
        data_dir=args.data_dir,
        principal=args.principal,
        metrics_port=args.metrics_port,
        providers_file=args.providers_file,
    )
    await serve(options)
    return 0


async def _hash_token(args: argparse.Namespace) -> int:
    if args.new:
        token = secrets.token_urlsafe(32)
        print(f"token:  {token}\nsha256: {hash_token(token)}")
        return 0
    token = args.token or (getpass.getpass("token: ") if sys.stdin.isatty() else sys.stdin.readline())
    print(hash_token(token.strip()))
    return 0


async def _runtime_instance(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    await run_runtime_instance_process(options_from_args(args))
    return 0


def _add_providers_file(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--providers-file",
        type=Path,
        default=None,
        help="LLM / retrieval providers JSON (default: the server config's, or $MCP_RUNTIME_PROVIDERS_FILE)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-runtime", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one pipeline to completion on the local runtime")
    run.add_argument("pipeline", help="path to a pipeline JSON file")
    run.add_argument("--input", default="{}", help="initial execution state as JSON")
    run.add_argument("--workers", type=int, default=4)
    run.add_argument("--data-dir", default=None, help="data directory (default .mcp-runtime)")
    run.add_argument("--tenant", default="default")
    run.add_argument("--user", default="cli")
    _add_providers_file(run)
    run.set_defaults(handler=_run_pipeline)

    serve_cmd = commands.add_parser("serve", help="run the MCP server (stdio or streamable HTTP)")
    serve_cmd.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=8765)
    serve_cmd.add_argument(
        "--config",
        type=Path,
        default=os.environ.get("MCP_RUNTIME_CONFIG") or None,
        help="server config JSON (principals, token hashes, RBAC files); default: embedded local admin",
    )
    serve_cmd.add_argument(
        "--data-dir", type=Path, default=None, help="data directory (default .mcp-runtime)"
    )
    serve_cmd.add_argument("--principal", default=None, help="stdio: run as this configured principal")
    serve_cmd.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="also serve Prometheus /metrics on this port (stdio has no other way; http has /metrics)",
    )
    _add_providers_file(serve_cmd)
    serve_cmd.set_defaults(handler=_serve)

    instance_cmd = commands.add_parser(
        "runtime-instance",
        help="host K child runtime instances behind an HTTP or gRPC command endpoint",
    )
    add_process_arguments(instance_cmd)
    instance_cmd.set_defaults(handler=_runtime_instance)

    hash_cmd = commands.add_parser("hash-token", help="print the sha256 to store in the config for a token")
    hash_cmd.add_argument("token", nargs="?", help="the token (omit to read it from stdin / a prompt)")
    hash_cmd.add_argument("--new", action="store_true", help="generate a new random token and its hash")
    hash_cmd.set_defaults(handler=_hash_token)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(args.handler(args))
    except (RuntimeCoreError, OSError) as exc:
        print(f"error [{getattr(exc, 'code', 'os_error')}]: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
