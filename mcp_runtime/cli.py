"""The `mcp-runtime` command line: `run` a pipeline locally (more commands as they land).

Owns argument parsing, progress output and exit codes. Must not contain runtime logic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.dag import EngineEvent, ExecutionView
from runtime_core.errors import RuntimeCoreError
from runtime_core.identity import ExecutionContextSnapshot
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
    settings = RuntimeSettings.from_env(data_dir=args.data_dir, workers=args.workers)
    snapshot = ExecutionContextSnapshot(user_id=args.user, tenant_id=args.tenant, context_key="cli")
    async with RuntimeServices(settings, observer=ProgressPrinter()) as services:
        execution_id = await services.engine.create_execution(pipeline, state, snapshot)
        print(f"execution {execution_id} pipeline {pipeline.key} workers {settings.workers}", file=sys.stderr)
        status = await services.engine.run(execution_id, workers=settings.workers)
        view = await services.dag_store.read_execution(execution_id)
    assert view is not None
    print(f"ExecutionId: {execution_id}\nStatus: {status}\n")
    print(_step_table(view))
    final = view.steps[-1]
    print(f"\nFinal result ({final.name}):")
    print(json.dumps(final.result if final.result is not None else final.error, indent=2, sort_keys=True))
    return 0 if status == "Completed" else 1


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
    run.set_defaults(handler=_run_pipeline)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(args.handler(args))
    except RuntimeCoreError as exc:
        print(f"error [{exc.code}]: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
