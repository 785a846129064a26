"""Issue 13.7: Redis restarted WITHOUT persistence (every key gone) while runs are active.

The runtime notices that the dataset it worked in is gone (its epoch changed) and never hides
it: every affected run ends within a bound, either restored from its durable copy and
Completed, or Failed with the reason code `hot_state_lost`; never reported Completed without
having completed. At start, a Redis without `appendonly yes` is named in a warning, or
refused when the setting asks for persistence.

Scenario (module fixture): a full `RuntimeServices` (control plane, background pump, one
in-process instance, SQLite durable store) on a private redis-server started without AOF;
10 runs of `a -> gate -> z` wait at the gate, and 4 more wait in the shared queue (every run
slot is taken), when Redis is killed and started again empty on the same port; then the gate
opens. The queued runs are queued again from their durable copies (same SharedRunId) and run
once; the runs that had left the queue are never queued again.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.continuity import HOT_STATE_LOST_REQUEUE_REASON
from runtime_core.control_plane import ControlPlaneSettings, RunStatusView, run_is_done
from runtime_core.errors import NotFoundError, StoreUnavailableError
from runtime_core.hot_state import EmbeddedRedis, connect_hot_state
from runtime_core.instances import HOT_STATE_LOST, LocalRunStatus
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from runtime_core.recovery import RecoveryReports
from tests.helpers import restart_empty, wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    OTHER_SHARED_TENANT,
    control_plane,
    start_instance,
)
from tests.reliability.restart_support import gated_pipeline

RUNS = 10
QUEUED = 4
BOUND_S = 60.0
GATED = parse_pipeline(gated_pipeline("lost-state"))


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    logging.getLogger("runtime_core").addHandler(handler)
    yield handler
    logging.getLogger("runtime_core").removeHandler(handler)


def _open(gate: Path) -> None:
    gate.write_text("open", encoding="utf-8")


@dataclass
class LostState:
    services: RuntimeServices
    shared_run_ids: list[str]
    queued_run_ids: list[str]
    views: list[RunStatusView]
    dataset_losses: int


def _settings(data_dir: Path, url: str) -> RuntimeSettings:
    return RuntimeSettings(
        redis_url=url,
        redis_prefix=f"lost{secrets.token_hex(4)}:",
        data_dir=data_dir,
        control_plane=ControlPlaneSettings(
            host="losthost",
            local_instances=1,
            workers_per_instance=RUNS,
            max_local_workers_per_execution=1,
            max_concurrent_runs_per_instance=RUNS,
            heartbeat_interval_ms=100,
            health_check_interval_ms=100,
            pump_idle_interval_ms=20,
            lost_run_requeue_grace_ms=500,
        ),
    )


async def _all_at_the_gate(services: RuntimeServices, shared_run_ids: list[str]) -> None:
    async def waiting() -> bool:
        views = [await services.control_plane.run_status(s, DEFAULT_TENANT) for s in shared_run_ids]
        return all(any(st.name == "gate" and st.status == "Running" for st in v.steps) for v in views)

    await wait_until(waiting, timeout=30, interval=0.05)


async def _still_queued(services: RuntimeServices, shared_run_ids: list[str]) -> None:
    async def queued() -> bool:
        views = [await services.control_plane.run_status(s, DEFAULT_TENANT) for s in shared_run_ids]
        return all(view.shared_status == "QueuedGlobally" for view in views)

    await wait_until(queued, timeout=30, interval=0.05)


@pytest.fixture(scope="module")
async def lost(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LostState]:
    data_dir = Path(tmp_path_factory.mktemp("lost-state"))
    server = EmbeddedRedis(data_dir / "redis", appendonly=False).start()
    gate = data_dir / "gate"
    try:
        async with RuntimeServices(_settings(data_dir, server.url)) as services:
            plane = services.control_plane
            submitted = [
                await plane.submit(GATED, {"gate": str(gate), "n": n}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
                for n in range(RUNS + QUEUED)
            ]
            shared = [s.shared_run_id for s in submitted]
            await _all_at_the_gate(services, shared[:RUNS])
            await _still_queued(services, shared[RUNS:])
            server = restart_empty(server)
            _open(gate)
            views: list[RunStatusView] = []

            async def all_ended() -> bool:
                try:
                    views[:] = [await plane.run_status(s, DEFAULT_TENANT) for s in shared]
                except (StoreUnavailableError, NotFoundError):  # until its instance restored it
                    return False
                return all(run_is_done(view) for view in views)

            await wait_until(all_ended, timeout=BOUND_S, interval=0.1)
            yield LostState(services, shared, shared[RUNS:], list(views), plane.dataset_watch.losses)
    finally:
        server.stop()


def test_every_run_ends_completed_from_its_durable_copy_or_failed_as_hot_state_lost(lost: LostState) -> None:
    for view in lost.views:
        completed = view.execution_status == view.local_status == "Completed"
        failed = view.local_status == "Failed" and (view.failure_reason or "").startswith(HOT_STATE_LOST)
        assert completed or failed, view


def test_a_run_reported_completed_really_completed_every_step(lost: LostState) -> None:
    completed = [view for view in lost.views if view.local_status == "Completed"]
    assert completed, "the durable execution headers restore these runs"
    for view in completed:
        assert [step.status for step in view.steps] == ["Completed"] * 3, view
        assert view.shared_status == "Dispatched"


async def test_the_runs_that_were_only_queued_are_queued_again_and_run_once(lost: LostState) -> None:
    audit = lost.services.audit
    await audit.ledger.flush()
    for view in lost.views:
        ledger = await audit.store.list_ledger(DEFAULT_TENANT.tenant_id, shared_run_id=view.shared_run_id)
        events = [entry.event for entry in ledger]
        requeued = [e for e in ledger if e.attributes.get("reason") == HOT_STATE_LOST_REQUEUE_REASON]
        if view.shared_run_id in lost.queued_run_ids:
            assert view.execution_status == "Completed" and view.shared_status == "Dispatched", view
            assert [step.status for step in view.steps] == ["Completed"] * 3, view
            assert len(requeued) == 1 and events.count("shared_run.dispatched") == 1, events
        else:
            assert requeued == [], events  # it had left the queue: never queued again


async def test_a_queued_runs_durable_copy_is_forgotten_once_the_run_is_archived(lost: LostState) -> None:
    store, runs = lost.services.audit.store, lost.services.control_plane.parts.runs
    copies = {copy.shared_run_id for copy in await store.list_submitted_runs(limit=1_000)}
    assert set(lost.shared_run_ids) <= copies  # still in hot state: their copies are kept
    [first, *_] = lost.queued_run_ids
    lifecycle = lost.services.control_plane.parts.lifecycle
    assert lifecycle.sweeper is not None and lifecycle.archiver is not None
    record = await runs.get(first)
    assert record is not None and record.local_run_id is not None
    await lifecycle.archiver.archive_local_end(record.local_run_id)
    assert first not in {copy.shared_run_id for copy in await store.list_submitted_runs(limit=1_000)}


def test_the_control_plane_noticed_the_lost_dataset(lost: LostState) -> None:
    assert lost.dataset_losses == 1


async def test_the_recovery_report_lists_every_run_once_under_one_hot_state_lost_incident(
    lost: LostState,
) -> None:
    """Issue 31.5: the runs restored from their durable copies, failed as lost and queued again all
    appear in one `hot_state_lost` incident (the new dataset's epoch), each with its outcome."""
    await lost.services.audit.ledger.flush()
    report = await RecoveryReports(lost.services.audit.queries).report(DEFAULT_TENANT)
    [incident] = report.incidents
    assert incident.cause == "hot_state_lost"
    outcomes = {run.shared_run_id: run.outcome.value for run in incident.runs}
    assert set(outcomes) == set(lost.shared_run_ids)
    assert {outcomes[s] for s in lost.queued_run_ids} == {"redispatched"}
    by_view = {
        view.shared_run_id: view for view in lost.views if view.shared_run_id not in lost.queued_run_ids
    }
    for shared_run_id, view in by_view.items():
        expected = "restored" if view.local_status == "Completed" else "failed_lost"
        assert outcomes[shared_run_id] == expected, view
    assert incident.counts.runs == RUNS + QUEUED and incident.counts.redispatched == QUEUED
    assert (await RecoveryReports(lost.services.audit.queries).report(OTHER_SHARED_TENANT)).incidents == []


async def test_the_instance_registered_again_and_takes_new_runs(lost: LostState) -> None:
    plane = lost.services.control_plane
    [instance] = await plane.list_instances(DEFAULT_TENANT)
    assert instance.live
    submitted = await plane.submit(GATED, {"gate": "/"}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)

    async def completed() -> bool:
        view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
        return run_is_done(view) and view.execution_status == "Completed"

    await wait_until(completed, timeout=20, interval=0.05)


async def test_without_a_durable_copy_a_run_fails_with_hot_state_lost_never_completed(tmp_path: Path) -> None:
    """A bare control plane (no durable store): nothing to restore from."""
    server = EmbeddedRedis(tmp_path / "redis", appendonly=False).start()
    hot_state = connect_hot_state(server.url, prefix="bare:")
    plane = control_plane(hot_state, heartbeat_interval_ms=100)
    gate = tmp_path / "gate"
    try:
        instance = await start_instance(plane, heartbeat_interval_ms=100)
        submitted = await plane.submit(GATED, {"gate": str(gate)}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        result = await plane.drain(1, DEFAULT_TENANT)
        [local_run_id] = [run.local_run_id for run in result.runs]
        assert local_run_id and submitted.shared_run_id

        async def at_the_gate() -> bool:
            view = await plane.run_status(local_run_id, DEFAULT_TENANT)
            return any(step.name == "gate" and step.status == "Running" for step in view.steps)

        await wait_until(at_the_gate, timeout=20, interval=0.02)
        server = restart_empty(server)
        _open(gate)
        final = await instance.wait_for_run(local_run_id, timeout=BOUND_S)
        assert final.status is LocalRunStatus.FAILED
        assert (final.failure_reason or "").startswith(HOT_STATE_LOST)
        view = await plane.run_status(local_run_id, DEFAULT_TENANT)
        assert run_is_done(view) and view.local_status == "Failed" and view.execution_status is None
    finally:
        await plane.stop()
        await hot_state.close()
        server.stop()


async def test_a_redis_without_appendonly_is_named_in_a_warning_at_start(
    tmp_path: Path, records: Records
) -> None:
    server = EmbeddedRedis(tmp_path / "redis", appendonly=False).start()
    try:
        settings = _settings(tmp_path, server.url)
        async with RuntimeServices(
            settings.model_copy(update={"control_plane": ControlPlaneSettings(local_instances=0)})
        ):
            pass
    finally:
        server.stop()
    assert any(
        "appendonly yes" in message and "redis.not_persistent" in message for message in records.messages
    )


async def test_a_redis_without_appendonly_is_refused_when_persistence_is_required(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis", appendonly=False).start()
    try:
        settings = _settings(tmp_path, server.url).model_copy(update={"require_redis_persistence": True})
        with pytest.raises(StoreUnavailableError, match="appendonly yes"):
            async with RuntimeServices(settings):
                pass
    finally:
        server.stop()


async def test_a_dataset_lost_while_no_control_plane_ran_is_noticed_at_the_next_start(tmp_path: Path) -> None:
    """Runs waiting in the queue when the control plane stopped, Redis restarted empty while
    nothing ran: the next start queues them again from their durable copies and runs them."""
    server = EmbeddedRedis(tmp_path / "redis", appendonly=False).start()
    settings = _settings(tmp_path, server.url)
    without_capacity = settings.model_copy(
        update={"control_plane": settings.control_plane.model_copy(update={"local_instances": 0})}
    )
    try:
        async with RuntimeServices(without_capacity) as services:
            plane = services.control_plane
            submitted = [
                await plane.submit(GATED, {"gate": "/", "n": n}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
                for n in range(QUEUED)
            ]
            shared = [s.shared_run_id for s in submitted]
            await _still_queued(services, shared)
        server = restart_empty(server)
        async with RuntimeServices(settings) as services:
            plane = services.control_plane

            async def all_completed() -> bool:
                try:
                    views = [await plane.run_status(s, DEFAULT_TENANT) for s in shared]
                except NotFoundError:  # until it is queued again
                    return False
                return all(run_is_done(v) and v.execution_status == "Completed" for v in views)

            await wait_until(all_completed, timeout=BOUND_S, interval=0.1)
            await services.audit.ledger.flush()
            for shared_run_id in shared:
                ledger = await services.audit.store.list_ledger(
                    DEFAULT_TENANT.tenant_id, shared_run_id=shared_run_id
                )
                reasons = [entry.attributes.get("reason") for entry in ledger]
                assert reasons.count(HOT_STATE_LOST_REQUEUE_REASON) == 1, reasons
    finally:
        server.stop()
