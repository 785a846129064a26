"""Control of a run held by ANOTHER `serve` process's in-process instance (two real processes).

Two `mcp-runtime serve --transport http` processes share one Redis and one data directory:
`holder` has the only runtime instance (in-process), `front` has none. A client talking only
to `front` submits runs (holder's pump dispatches them to its instance), then pauses,
resumes, answers a human-input gate and cancels them. `front` cannot reach holder's
in-process instance, so each action goes through execution control in Redis, and holder's
instance (woken by the run-event doorbell) carries it out.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime_core.hot_state import EmbeddedRedis
from tests.e2e.mcp_support import clean_environment
from tests.reliability.restart_support import McpSession, ServedControlPlane, gated_pipeline

BOUND_S = 60.0
GATED = gated_pipeline("cross-gated")
APPROVAL = {
    "name": "cross-approval",
    "steps": [
        {"name": "ask", "stepKey": "human.approval", "config": {"waitingKey": "go-ahead"}},
        {"name": "after", "stepKey": "test.noop", "dependsOn": ["ask"]},
    ],
}


@dataclass
class TwoPlanes:
    front: ServedControlPlane  # the client's only connection goes here
    holder: ServedControlPlane
    gates: Path


@pytest.fixture(scope="module")
def planes(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoPlanes]:
    tmp_path = tmp_path_factory.mktemp("two-planes")
    prefix = f"cross{secrets.token_hex(4)}:"

    def plane(host: str, instances: int) -> ServedControlPlane:
        env = clean_environment(
            REDIS_URL=redis_server.url,
            MCP_RUNTIME_REDIS_PREFIX=prefix,
            MCP_RUNTIME_HOST=host,
            MCP_RUNTIME_LOCAL_INSTANCES=str(instances),
        )
        return ServedControlPlane(tmp_path, env)

    holder, front = plane("holder", 1), plane("front", 0)
    try:
        holder.start()
        front.start()
        yield TwoPlanes(front, holder, tmp_path)
    finally:
        front.stop_quietly()
        holder.stop_quietly()


async def _until(client: McpSession, run_id: str, holds: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll run.status through `front` until `holds` (another process does the work)."""
    deadline = time.monotonic() + BOUND_S
    while not holds(status := await client.call("run.status", {"run_id": run_id})):
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} never reached the expected state: {status}")
        await asyncio.sleep(0.1)  # polling another process's progress
    return status


def _step(status: dict[str, Any], name: str) -> str:
    return next(step["status"] for step in status["steps"] if step["name"] == name)


async def _submitted(client: McpSession, definition: dict[str, Any], **run_input: str) -> str:
    submitted = await client.call("submit", {"definition": definition, "input": run_input})
    return str(submitted["shared_run_id"])


def _held_by_holder(status: dict[str, Any]) -> bool:
    return "holder:runtime-instance-" in (status["assigned_runtime_instance_id"] or "")


async def test_pause_and_resume_through_another_process_reach_the_run(planes: TwoPlanes) -> None:
    async with McpSession(planes.front.base_url) as client:
        gate = planes.gates / "pause-gate"
        run_id = await _submitted(client, GATED, gate=str(gate))
        at_gate = await _until(client, run_id, lambda s: s["steps"] and _step(s, "gate") == "Running")
        assert _held_by_holder(at_gate), at_gate

        paused = await client.call("pause", {"execution_id": at_gate["execution_id"]})
        assert paused["control_status"] == "Pausing"
        gate.write_text("open", encoding="utf-8")  # the running step finishes; nothing new starts
        parked = await _until(client, run_id, lambda s: s["control_status"] == "Paused")
        assert _step(parked, "z") != "Completed" and parked["local_status"] == "Running"

        await client.call("resume", {"execution_id": at_gate["execution_id"]})
        done = await _until(client, run_id, lambda s: s["done"])
        assert done["local_status"] == done["execution_status"] == "Completed"


async def test_input_submitted_through_another_process_reaches_the_waiting_run(planes: TwoPlanes) -> None:
    async with McpSession(planes.front.base_url) as client:
        run_id = await _submitted(client, APPROVAL)
        waiting = await _until(client, run_id, lambda s: s["control_status"] == "WaitingForInput")
        assert _held_by_holder(waiting), waiting

        await client.call(
            "input.submit",
            {
                "execution_id": waiting["execution_id"],
                "waiting_key": "go-ahead",
                "payload": {"approved": True},
            },
        )
        done = await _until(client, run_id, lambda s: s["done"])
        assert done["local_status"] == done["execution_status"] == "Completed"


async def test_cancel_through_another_process_cancels_the_running_run(planes: TwoPlanes) -> None:
    async with McpSession(planes.front.base_url) as client:
        gate = planes.gates / "cancel-gate"
        run_id = await _submitted(client, GATED, gate=str(gate))
        at_gate = await _until(client, run_id, lambda s: s["steps"] and _step(s, "gate") == "Running")
        assert _held_by_holder(at_gate), at_gate

        cancelled = await client.call("cancel", {"run_id": run_id})
        assert cancelled["execution_id"] == at_gate["execution_id"], cancelled
        gate.write_text("open", encoding="utf-8")  # its running step ends; nothing after it runs
        done = await _until(client, run_id, lambda s: s["done"])
        assert done["local_status"] == done["execution_status"] == "Cancelled"
        assert _step(done, "z") != "Completed"
