"""Rig of the schedule tests: a runtime on the test redis-server with a `test.hold` step whose
runs each wait until released, a unique tenant per test, and the runs a schedule made."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from runtime_core.bootstrap import RuntimeServices
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import RunListQuery
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SharedRunRecord
from runtime_core.scheduling import ScheduleSpec, ScheduleView
from runtime_core.steps import StepInvocation
from tests.reliability.mcp_rig import runtime_settings

HELD = parse_pipeline({"name": "held", "steps": [{"name": "hold", "stepKey": "test.hold"}]})


class HoldExecutor:
    """`test.hold`: each execution waits until `release(execution_id)` or its tenant is released
    (then every run of that tenant, started or not yet, goes through)."""

    step_key = "test.hold"

    def __init__(self) -> None:
        self._gates: dict[str, tuple[str, asyncio.Event]] = {}
        self._released_tenants: set[str] = set()

    def release(self, execution_id: str) -> None:
        if execution_id in self._gates:
            self._gates[execution_id][1].set()

    def release_tenant(self, tenant_id: str) -> None:
        self._released_tenants.add(tenant_id)
        for tenant, gate in self._gates.values():
            if tenant == tenant_id:
                gate.set()

    def release_all(self) -> None:
        for _, gate in self._gates.values():
            gate.set()

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        tenant = invocation.snapshot.tenant_id if invocation.snapshot else ""
        tenant_gate = self._gates.setdefault(invocation.execution_id, (tenant, asyncio.Event()))
        if tenant in self._released_tenants:
            tenant_gate[1].set()
        await tenant_gate[1].wait()
        return {"data": {"held": invocation.execution_id}}


async def scheduling_runtime(
    redis_url: str, data_dir: Path
) -> AsyncIterator[tuple[RuntimeServices, HoldExecutor]]:
    settings = runtime_settings(
        redis_url,
        data_dir,
        workers_per_instance=8,
        max_concurrent_runs_per_instance=8,
        pump_idle_interval_ms=20,
    )
    settings.control_plane.background_pump = True  # fired runs start on their own
    async with RuntimeServices(settings) as services:
        hold = HoldExecutor()
        services.executors.register(hold)
        try:
            yield services, hold
        finally:
            hold.release_all()


@asynccontextmanager
async def scheduled(
    services: RuntimeServices, hold: HoldExecutor, tenant: ExecutionContextSnapshot, **spec: Any
) -> AsyncIterator[ScheduleView]:
    """A schedule of HELD for `tenant`; afterwards paused and every run of the tenant released."""
    view = await create_schedule(services, tenant, **spec)
    try:
        yield view
    finally:
        await services.scheduling.service.pause(tenant, view.schedule_id)
        hold.release_tenant(tenant.tenant_id)


def new_tenant(user: str = "scheduler-user") -> ExecutionContextSnapshot:
    return ExecutionContextSnapshot(
        user_id=user, tenant_id=f"sched-{secrets.token_hex(4)}", roles=("operator",), context_key="sched-test"
    )


async def create_schedule(
    services: RuntimeServices, tenant: ExecutionContextSnapshot, name: str = "every-second", **spec: Any
) -> ScheduleView:
    values = spec if "cron" in spec else {"interval_seconds": 1, **spec}
    return await services.scheduling.service.create(tenant, name, HELD, {"n": 1}, ScheduleSpec(**values))


async def runs_of(services: RuntimeServices, tenant: ExecutionContextSnapshot) -> list[SharedRunRecord]:
    """The tenant's runs, oldest first (every run of these tests' tenants comes from a schedule)."""
    page = await services.control_plane.list_runs(RunListQuery(limit=200), tenant)
    records = [await services.control_plane.parts.runs.get(row.shared_run_id) for row in page.runs]
    found = [record for record in records if record is not None]
    return sorted(
        found, key=lambda record: record.snapshot.attributes["schedule.tick"] if record.snapshot else ""
    )


async def execution_of(
    services: RuntimeServices, tenant: ExecutionContextSnapshot, run_id: str
) -> str | None:
    return (await services.control_plane.run_status(run_id, tenant)).execution_id
