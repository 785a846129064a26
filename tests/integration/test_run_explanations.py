"""Issue 14.4: failures explain themselves in `run.status` (real runtime, real MCP session).

Per failed or retrying step: the error code and message, the retry count, when it failed and
when it runs again; a failed run names the step that failed it; a step that succeeded after a
retry keeps its last error; a run waiting for input shows the key, the step, its prompt and
the input it expects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from mcp import Client

from mcp_runtime import Principal
from runtime_core.bootstrap import RuntimeServices
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.steps import HumanApprovalExecutor
from tests.helpers import wait_until
from tests.reliability.mcp_rig import held_session, ok, runtime_settings, server_for, tool_backend

OPERATOR = Principal(name="op", user_id="olga", tenant_id="default", roles=("operator",))
RETRY_DELAY_MS = 60_000


def _retry(max_retries: int, delay_ms: int) -> dict[str, Any]:
    return {"maxRetries": max_retries, "strategy": "Fixed", "baseDelayMs": delay_ms, "maxDelayMs": delay_ms}


@pytest.fixture(scope="module")
async def client(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Client]:
    async with RuntimeServices(
        runtime_settings(redis_server.url, tmp_path_factory.mktemp("explain"))
    ) as services:
        async with held_session(server_for(tool_backend(services), OPERATOR)) as session:
            yield session


async def _submit(client: Client, pipeline: dict[str, Any]) -> str:
    """Submit, then drain until the run is dispatched (a finishing earlier run may hold the workers)."""
    run_id: str = (await ok(client, "submit", {"definition": pipeline}))["shared_run_id"]

    async def dispatched() -> bool:
        await ok(client, "queue.drain", {"max_count": 10})
        return (await ok(client, "run.status", {"run_id": run_id}))["shared_status"] == "Dispatched"

    await wait_until(dispatched, timeout=30, interval=0.05)
    return run_id


async def _status_when(client: Client, run_id: str, reached: Any) -> dict[str, Any]:
    status: dict[str, Any] = {}

    async def check() -> bool:
        status.update(await ok(client, "run.status", {"run_id": run_id}))
        return bool(reached(status))

    try:
        await wait_until(check, timeout=30, interval=0.05)
    except AssertionError:
        raise AssertionError(f"run {run_id} never reached the expected state: {status}") from None
    return status


def _rows(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in status["steps"]}


async def test_a_retrying_step_shows_its_error_retry_count_failure_time_and_next_retry(
    client: Client,
) -> None:
    pipeline = {
        "name": "retrying",
        "steps": [
            {
                "name": "flaky",
                "stepKey": "test.flaky",
                "config": {"failTimes": 5, "retry": _retry(5, RETRY_DELAY_MS)},
            }
        ],
    }
    run_id = await _submit(client, pipeline)

    status = await _status_when(
        client, run_id, lambda s: _rows(s).get("flaky", {}).get("status") == "WaitingForRetry"
    )
    await ok(client, "cancel", {"run_id": run_id})
    cancelled = await _status_when(client, run_id, lambda s: s["done"])

    assert cancelled["execution_status"] == "Cancelled"
    row = _rows(status)["flaky"]
    assert row["retry_count"] == 1
    assert row["last_error"]["code"] == "transient"
    assert row["last_error"]["message"] == "test.flaky step 'flaky' fails attempt 0 of the first 5"
    assert row["last_error"]["reason"]
    failed_at = datetime.fromisoformat(row["last_error"]["at"])
    assert datetime.fromisoformat(row["next_retry_at"]) - failed_at == timedelta(milliseconds=RETRY_DELAY_MS)
    assert status["failed_step"] is None and status["waiting_input"] is None


async def test_a_failed_run_names_the_step_that_failed_it_and_a_recovered_step_keeps_its_last_error(
    client: Client,
) -> None:
    pipeline = {
        "name": "failing",
        "steps": [
            {
                "name": "recovered",
                "stepKey": "test.flaky",
                "config": {"failTimes": 1, "retry": _retry(2, 10)},
            },
            {"name": "boom", "stepKey": "test.flaky", "config": {"failTimes": 9}},
            {"name": "never", "stepKey": "test.noop", "dependsOn": ["boom"]},
        ],
    }
    run_id = await _submit(client, pipeline)

    status = await _status_when(client, run_id, lambda s: s["done"])

    assert status["execution_status"] == "Failed"
    assert status["failed_step"] == "boom"
    assert status["failure_reason"] == (
        "step 'boom' (test.flaky) failed: [transient] test.flaky step 'boom' fails attempt 0 of the first 9"
    )
    rows = _rows(status)
    assert rows["boom"]["status"] == "Failed" and rows["boom"]["retry_count"] == 0
    assert rows["boom"]["last_error"]["code"] == "transient" and rows["boom"]["last_error"]["at"]
    assert rows["boom"]["next_retry_at"] is None
    assert rows["recovered"]["status"] == "Completed" and rows["recovered"]["retry_count"] == 1
    assert rows["recovered"]["last_error"]["message"].endswith("fails attempt 0 of the first 1")
    assert rows["never"]["status"] == "Pending" and rows["never"]["last_error"] is None


async def test_a_run_waiting_for_input_shows_the_key_the_step_the_prompt_and_the_expected_input(
    client: Client,
) -> None:
    approval = {"waitingKey": "go-live", "prompt": "Ship the release?"}
    pipeline = {
        "name": "waiting",
        "steps": [{"name": "approve", "stepKey": "human.approval", "config": approval}],
    }
    run_id = await _submit(client, pipeline)

    status = await _status_when(client, run_id, lambda s: s["control_status"] == "WaitingForInput")
    await ok(
        client,
        "input.submit",
        {"execution_id": status["execution_id"], "waiting_key": "go-live", "payload": {"approved": True}},
    )
    finished = await _status_when(client, run_id, lambda s: s["done"])

    assert status["waiting_key"] == "go-live"
    since = datetime.fromisoformat(status["waiting_input"].pop("since"))
    started, submitted = (datetime.fromisoformat(status[field]) for field in ("started_at", "submitted_at"))
    assert status["waiting_input"] == {
        "key": "go-live",
        "step": "approve",
        "prompt": "Ship the release?",
        "expected_input": HumanApprovalExecutor.input_schema,
    }
    assert finished["execution_status"] == "Completed" and finished["waiting_input"] is None
    # Waiting since the gate parked it: after the run started, before it was answered and ended.
    assert submitted <= started <= since <= datetime.fromisoformat(finished["ended_at"])
    assert finished["started_at"] == status["started_at"]
