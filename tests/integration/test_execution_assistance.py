"""Execution assistance, in process (real redis-server, single node and Redis Cluster): the lease
an assistant's writes are checked against, when an execution asks for help and on which boards,
and which instances may answer. The same over real runtime-instance processes:
`test_assistance_processes.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from runtime_core.assistance import (
    SHARED_SCOPE,
    AssistanceLeases,
    AssistanceSettings,
    HelpBoard,
    HelpRequester,
    SeatOutcome,
    assistant_claimer,
    assistant_records,
    tenant_scope,
)
from runtime_core.dag import ClaimOutcome, TransitionOutcome
from runtime_core.events import RunEvent, RunEventType
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    IsolationMode,
    LocalRunStatus,
    RuntimeInstance,
    TenantRuntimeSettings,
    TenantSettingsCatalog,
)
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    GateExecutor,
    control_plane,
    make_engine,
    start_instance,
)
from tests.integration.control_support import RecordingObserver

pytestmark = pytest.mark.redis_kinds("single", "cluster")

FAST = AssistanceSettings(poll_interval_ms=20, board_ttl_ms=400)
OWNED = ExecutionContextSnapshot(user_id="erin", tenant_id="tenant-own", context_key="assist-own")
TENANTS = TenantSettingsCatalog(
    {
        "tenant-own": TenantRuntimeSettings(
            tenant_id="tenant-own", isolation_mode=IsolationMode.DEDICATED, allow_shared_fallback=False
        )
    }
)


def _gated_fan_out(width: int, config: dict[str, Any] | None = None) -> PipelineDefinition:
    steps: list[dict[str, Any]] = [{"name": "start", "stepKey": "test.noop"}]
    steps += [{"name": f"g{i:03d}", "stepKey": "test.gate", "dependsOn": ["start"]} for i in range(width)]
    return parse_pipeline({"name": f"gated-fan-{width}", "config": config or {}, "steps": steps})


def _gated_root_fan_out(width: int) -> PipelineDefinition:
    """A fan-out opened by one gated step: nothing but that step is ready until it is released."""
    steps: list[dict[str, Any]] = [{"name": "start", "stepKey": "test.gate"}]
    steps += [{"name": f"n{i:03d}", "stepKey": "test.noop", "dependsOn": ["start"]} for i in range(width)]
    return parse_pipeline({"name": f"gated-root-fan-{width}", "steps": steps})


def _chain(length: int) -> PipelineDefinition:
    steps = [{"name": "s0", "stepKey": "test.noop"}]
    steps += [{"name": f"s{i}", "stepKey": "test.noop", "dependsOn": [f"s{i - 1}"]} for i in range(1, length)]
    return parse_pipeline({"name": f"chain-{length}", "steps": steps})


class CountingBoard(HelpBoard):
    """The instance's help board, counting its posts (the board itself is real Redis)."""

    posts = 0

    async def post(self, execution_id: str, scopes: Sequence[str], *, ttl_ms: int) -> None:
        CountingBoard.posts += 1
        await super().post(execution_id, scopes, ttl_ms=ttl_ms)


async def test_an_assistant_whose_lease_lapsed_can_neither_claim_complete_nor_fail(
    hot_state: HotState,
) -> None:
    engine, _ = make_engine(hot_state)
    store = engine.store
    pipeline = parse_pipeline(
        {"name": "three", "steps": [{"name": n, "stepKey": "test.noop"} for n in "abc"]}
    )
    execution_id = await engine.create_execution(pipeline, {}, DEFAULT_TENANT)
    leases, assistant = AssistanceLeases(store), "rt_helper|inc_1"
    seat = await leases.join(
        execution_id, assistant, runtime_instance_id="rt_helper", incarnation="inc_1", workers=2, lease_ms=300
    )
    claim = dict(lease_ms=60_000, worker_id="helper", token_prefix="h", owner=assistant_claimer(assistant))
    held = (await store.claim_ready_steps(execution_id, max_steps=2, **claim)).claims
    assert seat.outcome is SeatOutcome.SEATED and len(held) == 2

    async def lapsed() -> bool:
        return await hot_state.server_time_ms() > seat.lease_until_ms

    await wait_until(lapsed)
    completed = await store.advance(
        execution_id,
        [(held[0], {"data": {}})],
        max_claim=1,
        lease_ms=60_000,
        token_prefix="h",
        owner=claim["owner"],
    )
    failed = await store.fail_step(
        held[1], retry=True, delay_ms=0, error={"code": "x"}, claimer=claim["owner"]
    )
    single = await store.claim_step(execution_id, "c", **claim)
    renewed = await leases.renew(execution_id, assistant, lease_ms=300)
    view = await store.read_execution(execution_id)

    assert [r.outcome for r in completed.completed] == [TransitionOutcome.STALE_TOKEN]
    assert completed.claims.outcome is ClaimOutcome.SUPERSEDED
    assert completed.claims.detail == "assistance lease lapsed"
    assert failed.outcome is TransitionOutcome.STALE_TOKEN
    assert single.outcome is ClaimOutcome.SUPERSEDED
    assert renewed.outcome is SeatOutcome.NOT_SEATED
    assert view is not None
    assert {s.name: s.status for s in view.steps} == {"a": "Running", "b": "Running", "c": "Ready"}
    # The owner's workers (no claimer) complete as ever; its held steps come back by their lease.
    [mine] = (
        await store.claim_ready_steps(
            execution_id, max_steps=1, lease_ms=60_000, worker_id="w", token_prefix="o"
        )
    ).claims
    assert (await store.complete_step(mine, {"data": {}})).outcome is TransitionOutcome.APPLIED


@pytest.mark.parametrize(
    ("pipeline", "posts"),
    [
        (_chain(20), 0),
        (_gated_fan_out(3), 0),
        (_gated_fan_out(40, {"concurrency": {"maxDegreeOfParallelism": 4}}), 0),
        (_gated_fan_out(40), 1),
    ],
    ids=[
        "chain",
        "fan-out-not-wider-than-its-workers",
        "fan-out-capping-its-own-parallelism",
        "wide-fan-out",
    ],
)
async def test_a_run_asks_for_help_only_once_more_steps_are_ready_than_its_workers(
    hot_state: HotState, pipeline: PipelineDefinition, posts: int
) -> None:
    gate = GateExecutor()
    gate.release()
    plane = control_plane(hot_state, gate)
    await plane.start()
    try:
        owner = await start_instance(
            plane, worker_count=4, max_local_workers_per_execution=4, assistance=FAST
        )
        owner.assistance.requester.board = CountingBoard(hot_state)
        CountingBoard.posts = 0
        submitted = await plane.submit(pipeline, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        record = await _completed(plane, submitted.shared_run_id)
    finally:
        await plane.stop()
    assert record.status is LocalRunStatus.COMPLETED
    assert min(CountingBoard.posts, 1) == posts  # a wide run's post is refreshed while it wants help


async def test_a_wide_run_asks_on_the_boards_its_tenant_rules_allow_and_only_their_instances_assist(
    hot_state: HotState,
) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate, tenants=TENANTS)
    await plane.start()
    try:
        shared = await start_instance(plane, "shared-runtime", worker_count=2, assistance=FAST)
        owner = await _owned_instance(plane, 1)
        submitted = await plane.submit(_gated_fan_out(30), {}, SubmitMode.DIRECT_DISPATCH, OWNED)
        record = await _started(plane, submitted.shared_run_id)
        assert record.runtime_instance_id == owner.runtime_instance_id  # the shared one is not visible to it
        helper = await _owned_instance(plane, 2)

        async def assisted() -> bool:
            return bool(await _assistants(plane, record.execution_id))

        await wait_until(assisted, timeout=20)
        board = HelpBoard(hot_state)
        on_own_board = await board.wanted([tenant_scope(OWNED.tenant_id)], limit=10)
        on_shared_board = await board.wanted([SHARED_SCOPE], limit=10)
        gate.release()
        final = await _completed(plane, submitted.shared_run_id)
        assistants = await _assistants(plane, record.execution_id)
    finally:
        await plane.stop()
    assert final.status is LocalRunStatus.COMPLETED
    assert record.execution_id in on_own_board and record.execution_id not in on_shared_board
    assert [a.runtime_instance_id for a in assistants] == [helper.runtime_instance_id]
    assert shared.runtime_instance_id not in {a.runtime_instance_id for a in assistants}


async def test_a_run_wider_than_its_workers_asks_for_help_at_creation_before_any_backlog(
    hot_state: HotState,
) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    await plane.start()
    try:
        await start_instance(plane, worker_count=4, max_local_workers_per_execution=4, assistance=FAST)
        submitted = await plane.submit(
            _gated_root_fan_out(40), {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT
        )
        record = await _started(plane, submitted.shared_run_id)
        board = HelpBoard(hot_state)
        scopes = [SHARED_SCOPE, tenant_scope(DEFAULT_TENANT.tenant_id)]

        async def asking_while_only_its_first_step_runs() -> bool:
            return gate.started == 1 and record.execution_id in await board.wanted(scopes, limit=10)

        await wait_until(asking_while_only_its_first_step_runs)
        view = await plane.parts.dag_store.read_execution(record.execution_id)
        gate.release()
        final = await _completed(plane, submitted.shared_run_id)
    finally:
        await plane.stop()
    assert view is not None
    assert {s.status for s in view.steps if s.name != "start"} == {"Pending"}  # no backlog yet
    assert final.status is LocalRunStatus.COMPLETED


class _ReadBoard(HelpBoard):
    """The owner's board, keeping what its assistance loop read (the board is real Redis)."""

    def __init__(self, hot_state: HotState) -> None:
        super().__init__(hot_state)
        self.read: set[str] = set()

    async def wanted(self, scopes: Sequence[str], *, limit: int) -> list[str]:
        found = await super().wanted(scopes, limit=limit)
        self.read.update(found)
        return found


class _JoinLog(AssistanceLeases):
    joined: list[str]

    async def join(self, execution_id: str, *args: Any, **kwargs: Any) -> Any:
        self.joined.append(execution_id)
        return await super().join(execution_id, *args, **kwargs)


async def test_an_instance_does_not_try_to_assist_the_run_it_asks_help_for(hot_state: HotState) -> None:
    gate = GateExecutor()
    plane = control_plane(hot_state, gate)
    await plane.start()
    try:
        owner = await start_instance(
            plane, worker_count=4, max_local_workers_per_execution=4, assistance=FAST
        )
        board = owner.assistance.board = _ReadBoard(hot_state)
        leases = owner.assistance.leases = _JoinLog(owner.assistance.leases.dag_store)
        leases.joined = []
        submitted = await plane.submit(
            _gated_root_fan_out(40), {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT
        )
        record = await _started(plane, submitted.shared_run_id)

        async def its_idle_loop_saw_its_own_request() -> bool:
            return record.execution_id in board.read

        await wait_until(its_idle_loop_saw_its_own_request)
        gate.release()
        final = await _completed(plane, submitted.shared_run_id)
    finally:
        await plane.stop()
    assert final.status is LocalRunStatus.COMPLETED
    assert record.execution_id not in leases.joined


async def test_an_assistants_idle_workers_stay_while_one_of_them_runs_the_step_that_opens_the_fan_out(
    hot_state: HotState,
) -> None:
    gate = GateExecutor()
    engine, _ = make_engine(hot_state, gate)
    recorder = RecordingObserver()
    engine.observer = recorder
    execution_id = await engine.create_execution(_gated_root_fan_out(40), {}, DEFAULT_TENANT)
    assistant = "rt_helper|inc_1"
    seat = await AssistanceLeases(engine.store).join(
        execution_id,
        assistant,
        runtime_instance_id="rt_helper",
        incarnation="inc_1",
        workers=3,
        lease_ms=60_000,
    )
    assisting = asyncio.ensure_future(
        engine.assist(execution_id, workers=3, claimer=assistant_claimer(assistant))
    )

    async def root_running() -> bool:
        return gate.started == 1

    await wait_until(root_running)  # its other two workers found nothing claimable meanwhile
    gate.release()
    status = await assisting
    completed = recorder.named("step.completed")
    view = await engine.store.read_execution(execution_id)
    assert seat.outcome is SeatOutcome.SEATED and status == ""
    assert view is not None and {s.status for s in view.steps} == {"Completed"}
    assert len(completed) == 41 and len({e.step_name for e in completed}) == 41  # each exactly once
    assert len({e.worker_id for e in completed}) > 1  # not only the worker that ran the root


class _Announcements:
    """Stands in for the process's run-event publisher: keeps what was emitted."""

    def __init__(self) -> None:
        self.emitted: list[RunEvent] = []

    def emit(self, event: RunEvent) -> None:
        self.emitted.append(event)


async def test_help_asked_at_creation_is_announced_again_once_its_backlog_appears(
    hot_state: HotState,
) -> None:
    announcements = _Announcements()
    requester = HelpRequester(
        HelpBoard(hot_state),
        lambda _: [SHARED_SCOPE],
        board_ttl_ms=60_000,
        events=announcements,  # type: ignore[arg-type]
    )
    engine, _ = make_engine(hot_state, GateExecutor())
    execution_id = await engine.create_execution(_gated_root_fan_out(8), {}, DEFAULT_TENANT)
    meta = await engine.store.load_meta(execution_id)
    assert meta is not None
    await requester.wants_help(meta, 0, 4)  # at creation: nothing ready beyond its workers yet
    await requester.wants_help(meta, 0, 4)
    at_creation = len(announcements.emitted)
    await requester.wants_help(meta, 8, 4)  # the backlog appeared
    await requester.wants_help(meta, 8, 4)
    on_board = await HelpBoard(hot_state).wanted([SHARED_SCOPE], limit=10)
    await requester.settled(meta)
    assert at_creation == 1 and len(announcements.emitted) == 2
    assert {e.type for e in announcements.emitted} == {RunEventType.ASSISTANCE_WANTED}
    assert execution_id in on_board
    assert execution_id not in await HelpBoard(hot_state).wanted([SHARED_SCOPE], limit=10)


async def _owned_instance(plane: Any, n: int) -> RuntimeInstance:
    return await start_instance(
        plane,
        "tenant-own-runtime",
        n,
        worker_count=2,
        isolation_mode=IsolationMode.DEDICATED,
        tenant_id=OWNED.tenant_id,
        allow_shared_fallback=False,
        assistance=FAST,
    )


async def _assistants(plane: Any, execution_id: str | None) -> list[Any]:
    assert execution_id is not None
    meta = await plane.parts.dag_store.load_meta(execution_id)
    return assistant_records(meta.attributes) if meta is not None else []


async def _started(plane: Any, shared_run_id: str) -> Any:
    async def started() -> bool:
        record = await plane.parts.index.get_by_shared(shared_run_id)
        return record is not None and record.execution_id is not None

    await wait_until(started, timeout=20)
    return await plane.parts.index.get_by_shared(shared_run_id)


async def _completed(plane: Any, shared_run_id: str) -> Any:
    async def ended() -> bool:
        record = await plane.parts.index.get_by_shared(shared_run_id)
        return record is not None and record.status.is_terminal

    await wait_until(ended, timeout=30)
    return await plane.parts.index.get_by_shared(shared_run_id)
