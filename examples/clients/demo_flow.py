"""The end-to-end demo both example clients run: submit the RAG pipeline, follow it, ledger.

Uses only the MCP tools (through the SDK's `mcp.Client`), exactly as an assistant would.
When the server offers MCP Tasks (`io.modelcontextprotocol/tasks`) and the client was built
with `tasks_extension()`, `submit` runs as a task: the SDK follows it (tasks/get) and
`call_tool` returns once the run finished, its final `run.status` in `run`. Otherwise the
demo drives the classic loop: submit -> queue.drain -> poll run.status.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from mcp import Client
from mcp.client.extension import ClientExtension

from mcp_runtime.tasks import TASKS_EXTENSION, TasksClientExtension

PIPELINE = "rag-final-test"
PIPELINE_INPUT = {"candidateId": "c-1", "jobId": "j-1"}


class DemoFailed(Exception):
    """A tool answered an error (its text says what to do) or the run did not finish in time."""


def innermost(error: BaseException) -> BaseException:
    """The first leaf of nested exception groups (the SDK's task groups wrap what tools raise)."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def submit_arguments() -> dict[str, Any]:
    """The run to submit, with a fresh idempotency key: re-sending this same request (say,
    after a broken stream) returns the same run instead of starting a second one."""
    return {"pipeline": PIPELINE, "input": PIPELINE_INPUT, "idempotency_key": str(uuid.uuid4())}


def tasks_extension(timeout_s: float) -> ClientExtension:
    """Declares MCP Tasks to the server and follows a task until its run finished."""
    return TasksClientExtension(timeout_s=timeout_s)


def offers_tasks(client: Client) -> bool:
    return TASKS_EXTENSION in (client.server_capabilities.extensions or {})


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


async def run_as_task(client: Client) -> tuple[str, dict[str, Any]]:
    """`submit` as an MCP task: returns when the run finished, with its final run.status."""
    finished = await call(client, "submit", submit_arguments())
    say(f"submitted {PIPELINE} as an MCP task: {finished['shared_run_id']} tenant {finished['tenant_id']}")
    say("  (the server ran it; the client followed the task with tasks/get until it completed)")
    return finished["shared_run_id"], finished["run"]


async def run_by_polling(client: Client, timeout_s: float) -> tuple[str, dict[str, Any]]:
    """The classic loop: submit, drain the queue, poll run.status until done."""
    submitted = await call(client, "submit", submit_arguments())
    run_id = submitted["shared_run_id"]
    say(f"submitted {PIPELINE}: {run_id} ({submitted['status']}) tenant {submitted['tenant_id']}")

    drained = await call(client, "queue.drain", {"max_count": 10}, progress_callback=_print_progress)
    say(f"drained: {drained['dispatched']} dispatched, stop reason {drained['stop_reason']}")
    if not drained["dispatched"]:
        say("  (nothing left to drain: the server's background pump dispatched the run first)")
    return run_id, await wait_until_done(client, run_id, timeout_s)


async def run_rag_demo(client: Client, *, timeout_s: float = 60.0) -> int:
    catalog = await call(client, "pipelines.list", {})
    say("pipelines: " + ", ".join(p["name"] for p in catalog["pipelines"]))

    run_id, status = await (
        run_as_task(client) if offers_tasks(client) else run_by_polling(client, timeout_s)
    )
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
