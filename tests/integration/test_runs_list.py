"""Issue 15.2 `runs.list`, and issue 13.6 through the MCP tools: a tenant's runs newest first, from
hot state and durable run records alike, and every audit tool answering for an archived run.

A real runtime (real redis-server, SQLite, one in-process instance) behind a real in-memory MCP
client session; the lifecycle sweeper is driven by hand (grace 0). Each test works in a tenant
of its own, so its listing holds exactly the runs it made.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from mcp import Client

from mcp_runtime import (
    DEFAULT_PIPELINES_DIR,
    DEFAULT_RBAC_MODEL,
    DEFAULT_RBAC_POLICY,
    Authorizer,
    FixedPrincipal,
    Principal,
    ToolBackend,
    ToolGuard,
    build_server,
)
from runtime_core.bootstrap import RuntimeServices
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import HotStateRetention, Lifecycle, RunListQuery
from runtime_core.pipeline import PipelineCatalog
from tests.helpers import wait_until
from tests.integration.lifecycle_support import lifecycle_runtime

AUTHORIZER = Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY)
ONE = {"name": "one", "steps": [{"name": "only", "stepKey": "test.noop"}]}
OTHER = {"name": "other", "steps": [{"name": "only", "stepKey": "test.noop"}]}


@pytest.fixture(scope="module")
async def services(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RuntimeServices]:
    hot = HotStateRetention(enabled=False, grace_ms=0, record_retention_ms=300)
    settings = lifecycle_runtime(
        redis_server.url, tmp_path_factory.mktemp("runs-list"), hot, background_pump=False
    )
    async with RuntimeServices(settings) as started:
        yield started


@pytest.fixture(scope="module")
def backend(services: RuntimeServices) -> ToolBackend:
    return ToolBackend.from_services(services, PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR))


@pytest.fixture
def tenant() -> str:
    return f"tenant-{secrets.token_hex(4)}"


def _caller(tenant: str) -> ExecutionContextSnapshot:
    return ExecutionContextSnapshot(user_id="ada", tenant_id=tenant, context_key=f"t:{tenant}")


def principal(tenant: str, user: str = "ada", role: str = "operator") -> Principal:
    return Principal(name=f"{user}-{role}", user_id=user, tenant_id=tenant, roles=(role,))


def session(backend: ToolBackend, who: Principal) -> Client:
    return Client(build_server(backend, ToolGuard(FixedPrincipal(who), AUTHORIZER)))


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, " ".join(getattr(block, "text", "") for block in result.content)
    assert result.structured_content is not None
    return result.structured_content


async def failed(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)


async def submit(client: Client, definition: dict[str, Any] = ONE) -> str:
    return str((await ok(client, "submit", {"definition": definition}))["shared_run_id"])


async def finish(client: Client, run_id: str) -> dict[str, Any]:
    async def done() -> bool:
        await ok(client, "queue.drain", {"max_count": 50})
        return bool((await ok(client, "run.status", {"run_id": run_id}))["done"])

    await wait_until(done, timeout=30, interval=0.02)
    return await ok(client, "run.status", {"run_id": run_id})


async def sweep(services: RuntimeServices) -> None:
    lifecycle: Lifecycle = services.control_plane.parts.lifecycle
    assert lifecycle.sweeper is not None
    await lifecycle.sweeper.sweep_once()


async def listed(client: Client, **arguments: Any) -> list[dict[str, Any]]:
    return list((await ok(client, "runs.list", arguments))["runs"])


async def ids(client: Client, **arguments: Any) -> list[str]:
    return [row["shared_run_id"] for row in await listed(client, **arguments)]


async def interleaved_runs(client: Client, services: RuntimeServices) -> list[str]:
    """Five runs, oldest first: Cancelled (archived), queued, Cancelled (archived), queued, Cancelled."""
    runs = []
    for n in range(5):
        run_id = await submit(client)
        if n % 2 == 0:
            await ok(client, "cancel", {"run_id": run_id})
        runs.append(run_id)
    await sweep(services)
    return runs


# Order and pages


async def test_lists_the_tenants_runs_newest_first_from_hot_state_and_run_records(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with session(backend, principal(tenant)) as client:
        finished = [await submit(client) for _ in range(3)]
        for run_id in finished:
            await finish(client, run_id)
        await sweep(services)
        queued = [await submit(client) for _ in range(2)]
        rows = await listed(client)
    assert [row["shared_run_id"] for row in rows] == [*reversed(queued), *reversed(finished)]
    assert [(row["archived"], row["status"]) for row in rows] == [(False, "QueuedGlobally")] * 2 + [
        (True, "Completed")
    ] * 3
    assert all(row["pipeline"] == "one" and row["submitted_by"] == "ada" for row in rows)
    assert all(row["execution_id"] and row["ended_at"] for row in rows[2:])


async def test_pages_follow_the_cursor_across_both_sources_without_gaps_or_repeats(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with session(backend, principal(tenant)) as client:
        runs = await interleaved_runs(client, services)
        pages: list[list[dict[str, Any]]] = []
        cursor: str | None = None
        while True:
            page = await ok(client, "runs.list", {"limit": 2, **({"cursor": cursor} if cursor else {})})
            pages.append(page["runs"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert [[row["shared_run_id"] for row in page] for page in pages] == [
        [runs[4], runs[3]],
        [runs[2], runs[1]],
        [runs[0]],
    ]
    assert [row["archived"] for page in pages for row in page] == [True, False, True, False, True]


async def test_prev_cursor_pages_back_towards_newer_runs_across_both_sources(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with session(backend, principal(tenant)) as client:
        runs = await interleaved_runs(client, services)
        first = await ok(client, "runs.list", {"limit": 2})
        second = await ok(client, "runs.list", {"limit": 2, "cursor": first["next_cursor"]})
        last = await ok(client, "runs.list", {"limit": 2, "cursor": second["next_cursor"]})
        back = await ok(client, "runs.list", {"limit": 2, "prev_cursor": last["prev_cursor"]})
        newest = await ok(client, "runs.list", {"limit": 2, "prev_cursor": back["prev_cursor"]})
        both = await failed(client, "runs.list", {"cursor": first["next_cursor"], "prev_cursor": "x"})
    assert first["prev_cursor"] is None and last["next_cursor"] is None
    assert [row["shared_run_id"] for row in back["runs"]] == [runs[2], runs[1]]
    assert [row["shared_run_id"] for row in newest["runs"]] == [runs[4], runs[3]]
    assert newest["prev_cursor"] is None and newest["next_cursor"] is not None
    assert "[invalid_arguments]" in both and "not both" in both


APPROVAL = {
    "name": "ask",
    "steps": [
        {"name": "ask", "stepKey": "human.approval", "config": {"waitingKey": "go"}},
        {"name": "after", "stepKey": "test.noop", "dependsOn": ["ask"]},
    ],
}
FAILING = {"name": "fails", "steps": [{"name": "boom", "stepKey": "test.flaky", "config": {"failTimes": 3}}]}


async def test_a_run_parked_on_its_gate_is_listed_waiting_for_input_and_a_failed_one_names_its_step(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with session(backend, principal(tenant)) as client:
        waiting = await submit(client, APPROVAL)
        failing = await submit(client, FAILING)

        async def settled() -> bool:
            await ok(client, "queue.drain", {"max_count": 10})
            rows = {row["shared_run_id"]: row["status"] for row in await listed(client)}
            return rows == {waiting: "WaitingForInput", failing: "Failed"}

        await wait_until(settled, timeout=30, interval=0.05)
        parked = await ids(client, status="WaitingForInput")
        hot_failure = (await listed(client, status="Failed"))[0]
        counts = await services.control_plane.count_runs(RunListQuery(), _caller(tenant))
        await ok(client, "cancel", {"run_id": waiting})
        await finish(client, waiting)
        await sweep(services)
        archived_failure = (await listed(client, status="Failed"))[0]
        after = await services.control_plane.count_runs(RunListQuery(status="Failed"), _caller(tenant))
    assert parked == [waiting]
    for row in (hot_failure, archived_failure):
        assert row["failed_step"] == "boom"
        assert row["failure_reason"].startswith("step 'boom' (test.flaky) failed: [transient] ")
    assert archived_failure["archived"] and not hot_failure["archived"]
    assert counts.counts == {"WaitingForInput": 1, "Failed": 1} and not counts.partial
    assert after.counts == {"Cancelled": 1, "Failed": 1}


async def test_runs_stay_listed_once_their_hot_records_expired(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with session(backend, principal(tenant)) as client:
        run_id = await submit(client)
        await finish(client, run_id)
        await sweep(services)
        before = await listed(client)

        async def expired() -> bool:
            return await services.control_plane.parts.runs.get(run_id) is None

        await wait_until(expired, timeout=10, interval=0.05)
        after = await listed(client)
    assert after == before and [row["shared_run_id"] for row in after] == [run_id]


# Filters


async def test_filters_by_shared_status_and_overall_status(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with session(backend, principal(tenant)) as client:
        runs = await interleaved_runs(client, services)
        cancelled = await ids(client, shared_status="Cancelled")
        queued = await ids(client, status="QueuedGlobally")
        dispatched = await ids(client, shared_status="Dispatched")
    assert cancelled == [runs[4], runs[2], runs[0]]
    assert queued == [runs[3], runs[1]]
    assert dispatched == []


async def test_filters_by_pipeline_and_submitting_user(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with (
        session(backend, principal(tenant, "ada")) as ada,
        session(backend, principal(tenant, "bob")) as bob,
    ):
        by_ada = await submit(ada, ONE)
        by_bob = await submit(bob, OTHER)
        await ok(ada, "cancel", {"run_id": by_ada})
        await sweep(services)  # one archived, one hot: both sources are filtered alike
        assert await ids(ada, pipeline="other") == [by_bob]
        assert await ids(ada, pipeline="one") == [by_ada]
        assert await ids(bob, submitted_by="ada") == [by_ada]
        assert await ids(bob, submitted_by="bob", pipeline="one") == []


async def test_filters_by_submission_time_window(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with session(backend, principal(tenant)) as client:
        runs = await interleaved_runs(client, services)
        rows = await listed(client)
        at = {row["shared_run_id"]: datetime.fromisoformat(row["submitted_at"]) for row in rows}
        start, end = at[runs[1]], at[runs[3]]
        after = await ids(client, submitted_after=start.isoformat())
        before = await ids(client, submitted_before=end.isoformat())
        window = await ids(client, submitted_after=start.isoformat(), submitted_before=end.isoformat())
        future = await ids(client, submitted_after=(end + timedelta(days=1)).isoformat())
    newest_first = [row["shared_run_id"] for row in rows]
    assert after == [run for run in newest_first if at[run] >= start]
    assert before == [run for run in newest_first if at[run] < end]
    assert window == [run for run in newest_first if start <= at[run] < end]
    assert runs[1] in window and runs[4] not in window and future == []


# Tenants, roles and bad input


async def test_another_tenant_lists_nothing_of_this_tenant_even_with_its_cursor(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with (
        session(backend, principal(tenant)) as mine,
        session(backend, principal(f"{tenant}-other", role="admin")) as theirs,
    ):
        await interleaved_runs(mine, services)
        cursor = (await ok(mine, "runs.list", {"limit": 1}))["next_cursor"]
        assert cursor is not None
        foreign = await ok(theirs, "runs.list", {})
        foreign_page = await ok(theirs, "runs.list", {"cursor": cursor})
    assert foreign["runs"] == [] and foreign_page["runs"] == []
    assert foreign["tenant_id"] == f"{tenant}-other"


async def test_a_viewer_may_list_runs(backend: ToolBackend, services: RuntimeServices, tenant: str) -> None:
    async with (
        session(backend, principal(tenant)) as operator,
        session(backend, principal(tenant, "vera", "viewer")) as viewer,
    ):
        run_id = await submit(operator)
        assert await ids(viewer) == [run_id]


async def test_a_cursor_that_was_not_returned_is_invalid_arguments(backend: ToolBackend, tenant: str) -> None:
    async with session(backend, principal(tenant)) as client:
        text = await failed(client, "runs.list", {"cursor": "not-a-cursor!"})
        too_big = await failed(client, "runs.list", {"limit": 201})
    assert "[invalid_arguments]" in text and "next_cursor" in text and "not-a-cursor" not in text
    assert "[invalid_arguments]" in too_big


# Every audit tool answers for an archived run


async def test_status_ledger_trace_forensics_and_replay_answer_after_the_hot_state_is_gone(
    backend: ToolBackend, services: RuntimeServices, tenant: str
) -> None:
    async with session(backend, principal(tenant)) as client:
        run_id = await submit(client)
        before = await finish(client, run_id)
        execution_id = before["execution_id"]
        ledger = await ok(client, "ledger", {"run_id": run_id})
        trace = await ok(client, "trace", {"run_id": execution_id})
        await sweep(services)

        async def expired() -> bool:
            return await services.control_plane.parts.runs.get(run_id) is None

        await wait_until(expired, timeout=10, interval=0.05)
        after = {
            "status": await ok(client, "run.status", {"run_id": run_id}),
            "by_local": await ok(client, "run.status", {"run_id": before["local_run_id"]}),
            "ledger": await ok(client, "ledger", {"run_id": run_id}),
            "ledger_by_execution": await ok(client, "ledger", {"run_id": execution_id}),
            "trace": await ok(client, "trace", {"run_id": run_id}),
            "forensics": await ok(client, "forensics", {"execution_id": execution_id}),
        }
        replayed = await ok(client, "replay", {"execution_id": execution_id})
        after_replay = await ok(client, "run.status", {"run_id": run_id})
    unchanged = {key: value for key, value in before.items() if key != "effective_workers"}
    assert {k: v for k, v in after["status"].items() if k != "effective_workers"} == unchanged
    assert after["by_local"]["shared_run_id"] == run_id and after["by_local"]["done"]
    assert after["ledger"]["entries"] == ledger["entries"]
    assert {e["event"] for e in after["ledger_by_execution"]["entries"]} >= {"execution.finalized"}
    assert after["trace"]["spans"] == trace["spans"]
    assert after["forensics"] == {"records": []}
    assert (replayed["restored"], replayed["status"]) == (True, "Completed")
    assert after_replay["result"] == before["result"] and after_replay["done"]
