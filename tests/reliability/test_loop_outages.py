"""The recovery loops, the scale-out watcher and dispatch settlement ride out a Redis outage.

Each test runs its loop against a private `redis-server`, SIGKILLs it, and checks that the
loop task stays alive and reports the outage as structured `store.unavailable` warnings
without a traceback; after Redis is restarted on the same port, the loop does its work again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.errors import ConflictError
from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state
from runtime_core.instances import InstanceHealth
from runtime_core.providers import DispatchRequest, DispatchResponse, LocalRuntimeProvider, ProviderError
from runtime_core.queueing import (
    DispatchOutcome,
    PumpIdentity,
    QueueItemStatus,
    ScaleOutStatus,
    SharedRunStatus,
    SubmitMode,
)
from runtime_core.storage import SqliteDurableStore
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    ONE_STEP,
    TENANT_A,
    control_plane,
    start_instance,
)
from tests.integration.recovery_support import crash, recovery_rig, tenant_instance

OUTAGE_ATTEMPTS = 3
PUMP = PumpIdentity(pump_runtime_instance_id="rt_testhost:control-plane", pump_worker_id="outage-pump")


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "redis", appendonly=False).start()
    yield server
    server.stop()


@pytest.fixture
async def outage_hot_state(private_redis: EmbeddedRedis) -> AsyncIterator[HotState]:
    state = connect_hot_state(private_redis.url, prefix=f"o{secrets.token_hex(4)}:")
    yield state
    await state.close()


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[SqliteDurableStore]:
    store = await SqliteDurableStore.open(tmp_path / "runtime.db")
    yield store
    await store.close()


@contextlib.contextmanager
def redis_down(server: EmbeddedRedis) -> Iterator[None]:
    """SIGKILL the private Redis for the block; restart it on the same port afterwards."""
    server.kill()
    try:
        yield
    finally:
        server.start()


def store_records(caplog: pytest.LogCaptureFixture, event: str, operation: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.getMessage().startswith(event) and getattr(r, "operation", None) == operation
    ]


async def outage_reported(caplog: pytest.LogCaptureFixture, *operations: str) -> None:
    async def reported() -> bool:
        return all(
            len(store_records(caplog, "store.unavailable", op)) >= OUTAGE_ATTEMPTS for op in operations
        )

    await wait_until(reported, timeout=10)


async def recovery_reported(caplog: pytest.LogCaptureFixture, *operations: str) -> None:
    """`store.recovered` follows the first pass that completed after the outage."""

    async def reported() -> bool:
        return all(store_records(caplog, "store.recovered", op) for op in operations)

    await wait_until(reported, timeout=10)


def assert_warned_without_traceback(caplog: pytest.LogCaptureFixture, logger: str, operation: str) -> None:
    warnings = store_records(caplog, "store.unavailable", operation)
    assert warnings and all(r.levelno == logging.WARNING and r.exc_info is None for r in warnings)
    assert [r.attempt for r in warnings[:OUTAGE_ATTEMPTS]] == list(range(1, OUTAGE_ATTEMPTS + 1))
    assert [r.getMessage() for r in caplog.records if r.name == logger and r.exc_info] == []


async def test_recovery_loops_back_off_while_redis_is_down_and_recover_a_crash_after(
    private_redis: EmbeddedRedis,
    outage_hot_state: HotState,
    durable: SqliteDurableStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="runtime_core")
    rig = recovery_rig(outage_hot_state, durable, health_check_interval_ms=50, recovery_interval_ms=50)
    await rig.plane.start()
    loops = rig.plane.parts.recovery_loops
    try:
        with redis_down(private_redis):
            await outage_reported(caplog, "recovery.health_pass", "recovery.recovery_pass")
            assert len(loops._tasks) == 2 and not any(task.done() for task in loops._tasks)
        for operation in ("recovery.health_pass", "recovery.recovery_pass"):
            assert_warned_without_traceback(caplog, "runtime_core.recovery", operation)

        dead = await tenant_instance(rig, TENANT_A, n=1)
        await crash(dead)
        registry_key = rig.plane.parts.registry.keys(dead.runtime_instance_id).registry

        async def marked_unsafe_then_recovered() -> bool:
            health = await outage_hot_state.redis.hget(registry_key, "health")
            return health == InstanceHealth.RECOVERED

        await wait_until(marked_unsafe_then_recovered, timeout=10)
        await recovery_reported(caplog, "recovery.health_pass", "recovery.recovery_pass")
        assert not any(task.done() for task in loops._tasks)
    finally:
        await rig.plane.stop()


async def test_scale_out_watcher_backs_off_while_redis_is_down_and_fulfils_requests_after(
    private_redis: EmbeddedRedis, outage_hot_state: HotState, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="runtime_core")
    plane = control_plane(outage_hot_state)
    stop = asyncio.Event()
    watcher = asyncio.create_task(plane.parts.watcher.run_forever(stop, interval_ms=20))
    try:
        with redis_down(private_redis):
            await outage_reported(caplog, "scale_out.watch")
            assert not watcher.done()
        assert_warned_without_traceback(caplog, "runtime_core.queueing", "scale_out.watch")

        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        assert submitted.status is SharedRunStatus.SCALE_OUT_REQUESTED
        assert submitted.scale_out_request_id is not None

        async def fulfilled() -> bool:
            request = await plane.parts.scale_out.get(submitted.scale_out_request_id or "")
            return request is not None and request.status is ScaleOutStatus.FULFILLED

        await wait_until(fulfilled, timeout=10)
        await recovery_reported(caplog, "scale_out.watch")
        assert not watcher.done()
    finally:
        stop.set()
        await watcher
        await plane.stop()


class _ReplyLostInOutage(LocalRuntimeProvider):
    """Takes Redis down (gracefully: the AOF keeps every write) as the dispatch is in transit,
    brings it back shortly after, and never delivers the request before failing."""

    def __init__(self, plane: ControlPlane, server: EmbeddedRedis) -> None:
        super().__init__(plane.parts.pool)
        self.server = server
        self.in_transit: list[DispatchRequest] = []

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        self.in_transit.append(request)
        self.server.stop()
        asyncio.get_running_loop().call_later(0.3, self.server.start)
        raise ProviderError("injected: connection lost while Redis is down too")


async def test_a_failed_dispatch_is_settled_through_a_redis_outage_so_a_late_arrival_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = EmbeddedRedis(tmp_path / "aof", appendonly=True).start()
    hot_state = connect_hot_state(server.url, prefix=f"s{secrets.token_hex(4)}:")
    plane = control_plane(hot_state)
    instance = await start_instance(plane)
    provider = _ReplyLostInOutage(plane, server)
    plane.parts.providers.add(provider)
    try:
        submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        with caplog.at_level(logging.WARNING, logger="runtime_core"):
            result = await plane.parts.dispatcher.dispatch_next(PUMP)
        [late] = provider.in_transit
        item = await plane.parts.queue.item(submitted.shared_run_id)
        assert result.outcome is DispatchOutcome.FAILED
        assert item is not None and item.status is QueueItemStatus.PENDING
        assert any(getattr(r, "operation", None) == "dispatch.settle_attempt" for r in caplog.records)
        with pytest.raises(ConflictError):
            await LocalRuntimeProvider(plane.parts.pool).dispatch(late)
        assert instance.local_runs() == []
    finally:
        await plane.stop()
        await hot_state.close()
        server.stop()
