"""The `mcp-runtime` command line: run pipelines locally, answer their input gates, serve MCP,
list the registered `steps` (built-ins and plug-ins).

Owns argument parsing (every option validated and explained), progress output and exit
codes: 0 completed / served, 1 the run failed or was cancelled, 2 bad arguments or a typed
error (no traceback), 3 the run waits for input, 130 interrupted. What is printed about a
finished run lives in `_cli_report`. Must not contain runtime logic.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import importlib.metadata
import json
import logging
import os
import secrets
import sys
from pathlib import Path

from pydantic import ValidationError

from mcp_runtime import ServeOptions, hash_token, serve
from mcp_runtime._cli_inputs import json_object, read_pipeline_file
from mcp_runtime._cli_report import WAITING_FOR_INPUT, AnswerContext, outcome_report
from mcp_runtime._cli_wait_ready import add_wait_ready
from mcp_runtime._errors import validation_problems
from runtime_core.bootstrap import EngineServices, RuntimeSettings
from runtime_core.dag import LIVE_EVENTS, EngineEvent
from runtime_core.errors import InvalidPipelineError, RuntimeCoreError
from runtime_core.hosting import (
    add_process_arguments,
    options_from_args,
    port_number,
    positive_int,
    run_runtime_instance_process,
)
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.plugins import StepPluginSettings, describe_steps, split_references

DEFAULT_TENANT, DEFAULT_USER = "default", "cli"
EXIT_FAILED, EXIT_USAGE, EXIT_WAITING, EXIT_INTERRUPTED = 1, 2, 3, 130

DESCRIPTION = """\
Run deterministic AI-workflow pipelines (DAGs of retrieval, merge, prompt, decision, tool and
human-approval steps) and serve their control plane as an MCP server.

Without REDIS_URL, `run`, `input` and `serve` start their own redis-server and keep their
state (Redis AOF, SQLite durable store) in a per-user data directory ($XDG_DATA_HOME/
mcp-runtime, else ~/.local/share/mcp-runtime); --data-dir or MCP_RUNTIME_DATA_DIR choose
another one."""

EPILOG = """\
examples:
  mcp-runtime run pipeline.json --input '{"candidateId": "c-1", "jobId": "j-1"}'
  mcp-runtime input exec_0123abcd hire-approval --payload '{"approved": true}'
  mcp-runtime serve                                  # MCP over stdio, local admin of tenant `default`
  mcp-runtime serve --transport http --port 8765 --config principals.json
  mcp-runtime hash-token --new                       # a token and the sha256 to put in the config
  mcp-runtime wait-ready http://127.0.0.1:8765 grpc://127.0.0.1:8801 --timeout 60

environment:
  REDIS_URL                  a Redis to use instead of the embedded redis-server
  MCP_RUNTIME_DURABLE_URL    the durable store shared by every host instead of the data
                             directory's SQLite file: postgresql://user@host/db?sslmode=...
                             (password: MCP_RUNTIME_DURABLE_PASSWORD or PGPASSWORD)
  MONGODB_URI                MongoDB as the durable store (when MCP_RUNTIME_DURABLE_URL is unset)
  MCP_RUNTIME_DATA_DIR       the data directory (--data-dir wins)
  MCP_RUNTIME_CONFIG         serve: the server config file (--config wins)
  MCP_RUNTIME_REDIS_PREFIX   the prefix of every Redis key (default mcprt:)
  MCP_RUNTIME_TENANTS_FILE   tenant runtime settings (isolation, capacity) as JSON
  MCP_RUNTIME_PROVIDERS_FILE LLM / retrieval providers as JSON (--providers-file wins)

exit codes: 0 completed, 1 run failed or cancelled, 2 bad arguments or error,
3 run waits for input (see `mcp-runtime input`), 130 interrupted.
Documentation: docs/ in the repository (README.md links every page)."""


QUIET_EVENTS = frozenset({"step.claimed", *LIVE_EVENTS})


class ProgressPrinter:
    """Prints one line per step transition (and agent sub-step) to stderr so long runs show progress;
    a streaming step's live output is not repeated there."""

    async def on_event(self, event: EngineEvent) -> None:
        shown = event.name.startswith(("step.", "agent.")) and event.name not in QUIET_EVENTS
        if shown and event.step_name:
            print(f"  {event.name:<24} {event.step_name}", file=sys.stderr, flush=True)


def _settings(args: argparse.Namespace) -> RuntimeSettings:
    return RuntimeSettings.from_env(
        data_dir=args.data_dir,
        workers=args.workers,
        providers_file=args.providers_file,
        plugins=_plugins(args),
    )


def _plugins(args: argparse.Namespace) -> StepPluginSettings:
    return StepPluginSettings.from_env().with_references(args.steps or ())


def _snapshot(args: argparse.Namespace) -> ExecutionContextSnapshot:
    return ExecutionContextSnapshot(user_id=args.user, tenant_id=args.tenant, context_key="cli")


async def _advance(services: EngineServices, execution_id: str, args: argparse.Namespace) -> int:
    """Run the execution until it stops, print the outcome; the exit code for it."""
    status = await services.engine.run(execution_id, workers=services.settings.workers)
    view = await services.dag_store.read_execution(execution_id)
    assert view is not None
    control = (
        await services.control.get(execution_id, _snapshot(args)) if status == WAITING_FOR_INPUT else None
    )
    context = AnswerContext(
        services.settings.data_dir,
        args.tenant,
        args.user,
        (DEFAULT_TENANT, DEFAULT_USER),
        services.settings.providers_file,
    )
    expected = None
    if control is not None and control.waiting_step is not None:
        step_key = next((s.step_key for s in view.steps if s.name == control.waiting_step), "")
        expected = services.executors.expected_input(step_key)
    print(outcome_report(view, status, control, context, expected, every_step=args.steps_output))
    if status == "Completed":
        return 0
    return EXIT_WAITING if status == WAITING_FOR_INPUT else EXIT_FAILED


async def _run_pipeline(args: argparse.Namespace) -> int:
    pipeline = parse_pipeline(await read_pipeline_file(Path(args.pipeline)))
    settings = _settings(args)
    async with EngineServices(settings, observer=ProgressPrinter()) as services:
        execution_id = await services.engine.create_execution(pipeline, args.input, _snapshot(args))
        print(f"execution {execution_id} pipeline {pipeline.key} workers {settings.workers}", file=sys.stderr)
        return await _advance(services, execution_id, args)


async def _answer_input(args: argparse.Namespace) -> int:
    async with EngineServices(_settings(args), observer=ProgressPrinter()) as services:
        await services.control.submit_input(
            args.execution_id, args.waiting_key, args.payload, _snapshot(args)
        )
        print(f"input accepted under '{args.waiting_key}'; running {args.execution_id} on", file=sys.stderr)
        return await _advance(services, args.execution_id, args)


def _configure_logging() -> None:
    """Long-running commands log INFO to stderr (stdout is the MCP channel of stdio `serve`)."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per provider request is not news


async def _serve(args: argparse.Namespace) -> int:
    _configure_logging()
    options = ServeOptions(
        transport=args.transport,
        host=args.host,
        port=args.port,
        config_path=args.config,
        data_dir=args.data_dir,
        principal=args.principal,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        steps=split_references(args.steps or ()),
        providers_file=args.providers_file,
    )
    await serve(options)
    return 0


async def _list_steps(args: argparse.Namespace) -> int:
    described = await asyncio.to_thread(describe_steps, _plugins(args), args.step_key)
    if args.json or args.step_key:
        print(json.dumps([d.model_dump(mode="json") for d in described], indent=2))
        return 0
    rows = [("stepKey", "source", "description"), *((d.step_key, d.source, d.description) for d in described)]
    width = [max(len(row[i]) for row in rows) for i in (0, 1)]
    for key, source, description in rows:
        print(f"{key.ljust(width[0])}  {source.ljust(width[1])}  {description}")
    return 0


def _add_steps_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--steps",
        action="append",
        metavar="MODULE:ATTR",
        help="load step plug-ins from this reference too (repeat or comma-separate); installed entry "
        "points (group mcp_runtime.steps) and $MCP_RUNTIME_STEPS always load",
    )


async def _hash_token(args: argparse.Namespace) -> int:
    if args.new:
        token = secrets.token_urlsafe(32)
        print(f"token:  {token}\nsha256: {hash_token(token)}")
        return 0
    token = args.token or (getpass.getpass("token: ") if sys.stdin.isatty() else sys.stdin.readline())
    print(hash_token(token.strip()))
    return 0


async def _runtime_instance(args: argparse.Namespace) -> int:
    _configure_logging()
    await run_runtime_instance_process(options_from_args(args))
    return 0


def _add_providers_file(command: argparse.ArgumentParser, default_help: str) -> None:
    command.add_argument(
        "--providers-file",
        type=Path,
        default=None,
        help=f"LLM / retrieval providers JSON (default: {default_help})",
    )


def _add_run_options(command: argparse.ArgumentParser) -> None:
    """Where an execution lives and who it belongs to (shared by `run` and `input`)."""
    command.add_argument(
        "--workers", type=positive_int, default=4, help="steps executed concurrently (default 4)"
    )
    command.add_argument(
        "--data-dir", type=Path, default=None, help="data directory (default: the per-user directory)"
    )
    command.add_argument(
        "--tenant", default=DEFAULT_TENANT, help=f"tenant the execution belongs to (default {DEFAULT_TENANT})"
    )
    command.add_argument(
        "--user", default=DEFAULT_USER, help=f"user recorded as its submitter (default {DEFAULT_USER})"
    )
    _add_steps_option(command)
    _add_providers_file(command, "$MCP_RUNTIME_PROVIDERS_FILE, else the offline template and demo database")
    command.add_argument(
        "--steps-output",
        action="store_true",
        help="print the result of every step that has one, not only the final step's",
    )


def _add_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "run",
        help="run one pipeline to completion on the local runtime",
        description="Run a pipeline JSON file on the local runtime and print every step and the result. "
        "Progress goes to stderr, the outcome to stdout.",
    )
    run.add_argument("pipeline", help="path to a pipeline JSON file (see examples/pipelines)")
    run.add_argument(
        "--input", type=json_object, default={}, help="initial execution state, a JSON object (default {})"
    )
    _add_run_options(run)
    run.set_defaults(handler=_run_pipeline)


def _add_input(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    answer = commands.add_parser(
        "input",
        help="answer a run waiting for input and run it on",
        description="Submit the answer a human-approval step waits for (its waiting key, printed by "
        "`mcp-runtime run`), then run the execution on until it stops again.",
    )
    answer.add_argument("execution_id", help="the ExecutionId printed by `mcp-runtime run`")
    answer.add_argument("waiting_key", help="the key the step waits under (e.g. hire-approval)")
    answer.add_argument(
        "--payload",
        type=json_object,
        default={},
        help="the answer, a JSON object, e.g. '{\"approved\": true}' (default {})",
    )
    _add_run_options(answer)
    answer.set_defaults(handler=_answer_input)


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve_cmd = commands.add_parser(
        "serve",
        help="run the MCP server (stdio or streamable HTTP)",
        description="Serve the control plane as an MCP server. HTTP also answers GET /livez, /readyz "
        "and /healthz without a token.",
    )
    serve_cmd.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or streamable HTTP"
    )
    serve_cmd.add_argument(
        "--host", default="127.0.0.1", help="http: address to listen on (default 127.0.0.1)"
    )
    serve_cmd.add_argument(
        "--port", type=port_number, default=8765, help="http: port to listen on (default 8765)"
    )
    serve_cmd.add_argument(
        "--config",
        type=Path,
        default=os.environ.get("MCP_RUNTIME_CONFIG") or None,
        help="server config JSON (principals, token hashes, RBAC files); default: embedded local admin",
    )
    serve_cmd.add_argument(
        "--data-dir", type=Path, default=None, help="data directory (default: the per-user directory)"
    )
    serve_cmd.add_argument(
        "--principal", default=None, help="stdio: run as this configured principal (default: the config's)"
    )
    serve_cmd.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus /metrics on this port instead of the HTTP server's (stdio has no other way)",
    )
    serve_cmd.add_argument(
        "--metrics-host",
        default=None,
        help="the address of --metrics-port (default: --host), e.g. a private interface",
    )
    _add_steps_option(serve_cmd)
    _add_providers_file(serve_cmd, "the config's providers_file, else $MCP_RUNTIME_PROVIDERS_FILE")
    serve_cmd.set_defaults(handler=_serve)


def _add_steps(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    steps_cmd = commands.add_parser(
        "steps",
        help="list the registered step keys (built-ins and plug-ins) or describe one",
        description="List every step key this runtime can run with where it comes from, or print one "
        "step's description and config schema as JSON.",
    )
    steps_cmd.add_argument("step_key", nargs="?", help="describe this step key (config schema as JSON)")
    steps_cmd.add_argument("--json", action="store_true", help="print every description as JSON")
    _add_steps_option(steps_cmd)
    steps_cmd.set_defaults(handler=_list_steps)


def _version() -> str:
    try:
        return importlib.metadata.version("mcp-runtime")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-runtime",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(commands)
    _add_input(commands)
    _add_serve(commands)
    _add_steps(commands)
    instance_cmd = commands.add_parser(
        "runtime-instance",
        help="host K child runtime instances behind an HTTP or gRPC command endpoint",
        description="Host runtime instances in this process for a control plane found through Redis "
        "(start `mcp-runtime serve` first). HTTP answers GET /livez, /readyz and /healthz; gRPC "
        "the standard grpc.health.v1.Health service.",
    )
    add_process_arguments(instance_cmd)
    instance_cmd.set_defaults(handler=_runtime_instance)
    hash_cmd = commands.add_parser("hash-token", help="print the sha256 to store in the config for a token")
    hash_cmd.add_argument("token", nargs="?", help="the token (omit to read it from stdin / a prompt)")
    hash_cmd.add_argument("--new", action="store_true", help="generate a new random token and its hash")
    hash_cmd.set_defaults(handler=_hash_token)
    add_wait_ready(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(args.handler(args))
    except (RuntimeCoreError, OSError) as exc:
        print(f"error {_error_text(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except ValidationError as exc:
        print(f"error [invalid_arguments]: {validation_problems(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _error_text(exc: RuntimeCoreError | OSError) -> str:
    """`[code] message (hint)`; a refused pipeline names the validation rule it broke."""
    if isinstance(exc, InvalidPipelineError):
        return f"[{exc.code}] rule {exc.rule}: {exc}"
    return f"[{getattr(exc, 'code', 'os_error')}]: {exc}"


if __name__ == "__main__":
    sys.exit(main())
