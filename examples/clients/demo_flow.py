"""The end-to-end demo both example clients run: submit the RAG pipeline, drain, follow, ledger.

Uses only the MCP tools (through the SDK's `mcp.Client`), exactly as an assistant would.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from mcp import Client

PIPELINE = "rag-final-test"
PIPELINE_INPUT = {"candidateId": "c-1", "jobId": "j-1"}


class DemoFailed(Exception):
    """A tool answered an error (its text says what to do) or the run did not finish in time."""


def innermost(error: BaseException) -> BaseException:
    """The first leaf of nested exception groups (the SDK's task groups wrap what tools raise)."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def say(text: str) -> None:
    print(text, flush=True)


async def call(client: Client, tool: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    """Call a tool; a tool error (its text says what to do) ends the demo."""
    result = await client.call_tool(tool, arguments, **options)
    if result.is_error:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise DemoFailed(f"{tool} failed: {text}")
    assert result.structured_content is not None
    return result.structured_content


async def _print_progress(progress: float, total: float | None, message: str | None) -> None:
    say(f"  drain progress {progress:g}/{total:g}: {message or ''}")


async def wait_until_done(client: Client, run_id: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        status = await call(client, "run.status", {"run_id": run_id})
        if status["done"]:
            return status
        if time.monotonic() > deadline:
            raise DemoFailed(f"{run_id} not done after {timeout_s}s: {json.dumps(status, indent=2)}")
        await asyncio.sleep(0.2)


async def run_rag_demo(client: Client, *, timeout_s: float = 60.0) -> int:
    catalog = await call(client, "pipelines.list", {})
    say("pipelines: " + ", ".join(p["name"] for p in catalog["pipelines"]))

    submitted = await call(client, "submit", {"pipeline": PIPELINE, "input": PIPELINE_INPUT})
    run_id = submitted["shared_run_id"]
    say(f"submitted {PIPELINE}: {run_id} ({submitted['status']}) tenant {submitted['tenant_id']}")

    drained = await call(client, "queue.drain", {"max_count": 10}, progress_callback=_print_progress)
    say(f"drained: {drained['dispatched']} dispatched, stop reason {drained['stop_reason']}")
    if not drained["dispatched"]:
        say("  (nothing left to drain: the server's background pump dispatched the run first)")

    status = await wait_until_done(client, run_id, timeout_s)
    say(f"\nrun {run_id}\n  local run  {status['local_run_id']}\n  execution  {status['execution_id']}")
    say(f"  instance   {status['assigned_runtime_instance_id']}\n  status     {status['execution_status']}")
    for step in status["steps"]:
        say(f"    {step['name']:<10} {step['step_key']:<14} {step['status']}")
    say("result:\n" + json.dumps(status["result"], indent=2, sort_keys=True))

    ledger = await call(client, "ledger", {"run_id": run_id})
    say(f"\nledger ({len(ledger['entries'])} entries):")
    for entry in ledger["entries"]:
        step = f" {entry['step_name']}" if entry["step_name"] else ""
        say(f"  {entry['recorded_at']}  {entry['event']}{step}")
    return 0 if status["execution_status"] == "Completed" else 1
