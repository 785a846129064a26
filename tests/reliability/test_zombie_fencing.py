"""Issue 13.2: a runtime-instance process paused (SIGSTOP) past the health window is marked
Unsafe and its work recovered elsewhere; woken again (SIGCONT) it learns it was fenced and
executes nothing: no step claimed or completed, no run started, no record written.

The zombie is a real `python -m runtime_core.hosting --transport http` child holding two
runs of `a -> gate -> z` (1 worker, 1 run slot): the first at its gate step, the second in its local
queue. The control plane in this process (recovery on, short health window) marks it
Unsafe and recovers both runs onto its own in-process instance (whose queue was paused until
then). While both wait at the gate there, the zombie is continued; once it reports itself
fenced, the gate opens and both runs complete on the replacement.
"""

from __future__ import annotations

import os
import secrets
import signal
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from runtime_core.audit import build_audit_services
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings, TenantsFile, run_is_done
from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state
from runtime_core.instances import (
    HostedProcess,
    HostLaunch,
    HostManagerSettings,
    HostTransport,
    InstanceHealth,
    LocalRunStatus,
    LocalRunView,
)
from runtime_core.pipeline import parse_pipeline
from runtime_core.providers import DispatchRequest, RunRef
from runtime_core.queueing import PumpIdentity, SubmitMode
from runtime_core.storage import LedgerEntry, SqliteDurableStore
from tests.helpers import wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, EXAMPLE_TENANTS, make_engine
from tests.reliability.restart_support import executions_per_shared_run, gated_pipeline

HEARTBEAT_MS = 100
HEALTH_WINDOW_MS = 1_500
GATED = gated_pipeline("zombie-gated")


@dataclass
class Zombie:
    plane: ControlPlane
    durable: SqliteDurableStore
    process: HostedProcess
    shared_run_ids: list[str]
    local_run_ids: list[str]
    unsafe_at_ms: int
    fenced: dict[str, str]
    zombie_views: list[LocalRunView]

    @property
    def runtime_instance_id(self) -> str:
        return self.process.runtime_instance_ids[0]


def _control_plane(
    hot_state: HotState, redis: EmbeddedRedis, data_dir: Path, durable: SqliteDurableStore
) -> ControlPlane:
    engine, control = make_engine(hot_state)
    audit = build_audit_services(durable, engine.store, instance_id="zombie-test")
    engine.observer, engine.results = audit.observer, audit.codec
    settings = ControlPlaneSettings(
        host="testhost",
        local_instances=1,
        workers_per_instance=2,
        max_local_workers_per_execution=1,
        max_concurrent_runs_per_instance=2,
        background_pump=False,
        heartbeat_interval_ms=HEARTBEAT_MS,
        health_window_ms=HEALTH_WINDOW_MS,
        health_check_interval_ms=100,
        recovery_interval_ms=100,
        scale_out_enabled=False,
    )
    hosting = HostManagerSettings(
        redis_url=redis.url,
        redis_prefix=hot_state.prefix,
        data_dir=data_dir,
        host_name="testhost",
        tenants_file=EXAMPLE_TENANTS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        stop_grace_s=10,
    )
    tenants = TenantsFile.read(EXAMPLE_TENANTS).catalog
    return ControlPlane.build(
        hot_state, engine, control, settings, tenants=tenants, audit=audit, hosting=hosting
    )


def _open(gate: Path) -> None:
    gate.write_text("open", encoding="utf-8")


def _fenced_readiness(process: HostedProcess) -> str | None:
    """The zombie's /readyz detail once it reports a fenced instance (None before)."""
    body = httpx.get(f"{process.endpoint}/readyz", timeout=2).json()
    loops = body["checks"].get("background_loops", {})
    detail = str(loops.get("detail", ""))
    return detail if not loops.get("ok", True) and "runtime_instances_not_fenced" in detail else None


def _fence_logged(process: HostedProcess) -> str:
    """The zombie's own log line saying why it fenced itself."""
    lines = Path(process.log_path).read_text(encoding="utf-8", errors="replace").splitlines()
    return next(line for line in lines if "instance.fenced" in line)


async def _queue_behind(plane: ControlPlane, zombie: HostedProcess, shared_run_id: str) -> None:
    """Put a run in the zombie's local queue although its only run slot is taken (admission
    would not offer it): claim the item and dispatch it the way the dispatcher does after admission."""
    parts = plane.parts
    claim = await parts.queue.claim_next(
        PumpIdentity(pump_runtime_instance_id="test", pump_worker_id="zombie")
    )
    assert claim is not None and claim.shared_run_id == shared_run_id
    run = await parts.runs.get(shared_run_id)
    assert run is not None
    rid = zombie.runtime_instance_ids[0]
    response = await parts.providers.by_name(HostTransport.HTTP.value).dispatch(
        DispatchRequest(
            runtime_instance_id=rid,
            shared_run_id=shared_run_id,
            pipeline=run.pipeline,
            input=run.input,
            snapshot=run.snapshot,
        )
    )
    fields = {"local_run_id": response.local_run_id, "assigned_runtime_instance_id": rid}
    assert (await parts.queue.mark_dispatched(shared_run_id, claim.token, fields)).applied


async def _hold_two_runs(
    plane: ControlPlane, zombie: HostedProcess, gate: Path
) -> tuple[list[str], list[str]]:
    """The zombie holds two runs: the first waits at its gate, the second in its local queue."""
    shared = []
    for n in range(2):
        submitted = await plane.submit(
            parse_pipeline(GATED), {"gate": str(gate), "n": n}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT
        )
        shared.append(submitted.shared_run_id)
    assert (await plane.drain(1, DEFAULT_TENANT)).dispatched == 1

    async def gate_running() -> bool:
        view = await plane.run_status(shared[0], DEFAULT_TENANT)
        return any(step.name == "gate" and step.status == "Running" for step in view.steps)

    await wait_until(gate_running, timeout=20, interval=0.02)
    await _queue_behind(plane, zombie, shared[1])
    views = [await plane.run_status(s, DEFAULT_TENANT) for s in shared]
    assert {v.assigned_runtime_instance_id for v in views} == {zombie.runtime_instance_ids[0]}
    assert views[1].local_status == LocalRunStatus.QUEUED.value
    return shared, [v.local_run_id or "" for v in views]


async def _recover_elsewhere(plane: ControlPlane, zombie: HostedProcess, shared: list[str]) -> int:
    """Pause the zombie until it is Unsafe and both runs dispatched to the local instance."""
    os.kill(zombie.pid, signal.SIGSTOP)
    registry_key = plane.parts.registry.keys(zombie.runtime_instance_ids[0]).registry

    async def recovered() -> bool:
        return await plane.parts.hot_state.redis.hget(registry_key, "health") == InstanceHealth.RECOVERED

    await wait_until(recovered, timeout=20, interval=0.05)
    local = plane.parts.pool.instances()[0].runtime_instance_id
    await plane.resume_queue(local, DEFAULT_TENANT)

    async def redispatched() -> bool:
        await plane.drain(10, DEFAULT_TENANT)
        views = [await plane.run_status(s, DEFAULT_TENANT) for s in shared]
        return all(v.assigned_runtime_instance_id == local for v in views)

    await wait_until(redispatched, timeout=20, interval=0.05)
    return int(await plane.parts.hot_state.redis.hget(registry_key, "unsafe_at_ms") or 0)


async def _zombie_runs_ended(
    plane: ControlPlane, zombie: HostedProcess, local_run_ids: list[str]
) -> list[LocalRunView]:
    """The zombie's own view of the two runs, once neither is queued or running there."""
    provider = plane.parts.providers.by_name(HostTransport.HTTP.value)
    rid = zombie.runtime_instance_ids[0]
    views: list[LocalRunView] = []

    async def ended() -> bool:
        views[:] = [
            await provider.run_status(RunRef(runtime_instance_id=rid, local_run_id=lrun))
            for lrun in local_run_ids
        ]
        return all(view.status.is_terminal for view in views)

    await wait_until(ended, timeout=20, interval=0.05)
    return views


async def _wait_both_at_the_gate(plane: ControlPlane, shared: list[str]) -> None:
    async def at_the_gate() -> bool:
        views = [await plane.run_status(s, DEFAULT_TENANT) for s in shared]
        return all(any(step.name == "gate" and step.status == "Running" for step in v.steps) for v in views)

    await wait_until(at_the_gate, timeout=20, interval=0.02)


@pytest.fixture(scope="module")
async def zombie(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Zombie]:
    data_dir = Path(tmp_path_factory.mktemp("zombie"))
    hot_state = connect_hot_state(redis_server.url, prefix=f"zombie{secrets.token_hex(4)}:")
    durable = await SqliteDurableStore.open(data_dir / "runtime.db")
    plane = _control_plane(hot_state, redis_server, data_dir, durable)
    await plane.start()
    try:
        local = plane.parts.pool.instances()[0].runtime_instance_id
        await plane.pause_queue(local, DEFAULT_TENANT)
        assert plane.parts.hosts is not None
        process = await plane.parts.hosts.start_host(
            HostLaunch(
                transport=HostTransport.HTTP,
                tenant_id=DEFAULT_TENANT.tenant_id,
                instance_prefix="zombie",
                worker_count=1,
                max_local_workers_per_execution=1,
                max_concurrent_runs=1,
            )
        )
        gate = data_dir / "gate"
        shared, local_runs = await _hold_two_runs(plane, process, gate)
        unsafe_at_ms = await _recover_elsewhere(plane, process, shared)
        await _wait_both_at_the_gate(plane, shared)
        # The zombie wakes while the recovered runs still wait at the gate on the replacement.
        os.kill(process.pid, signal.SIGCONT)

        async def learned_it() -> bool:
            return _fenced_readiness(process) is not None

        await wait_until(learned_it, timeout=20, interval=0.05)
        fenced = {"readiness": _fenced_readiness(process) or "", "log": _fence_logged(process)}
        views = await _zombie_runs_ended(plane, process, local_runs)
        _open(gate)

        async def both_done() -> bool:
            return all([run_is_done(await plane.run_status(s, DEFAULT_TENANT)) for s in shared])

        await wait_until(both_done, timeout=30, interval=0.05)
        await plane.parts.hosts.stop_host(process.host_id)  # SIGTERM: its ledger is flushed
        yield Zombie(plane, durable, process, shared, local_runs, unsafe_at_ms, fenced, views)
    finally:
        await plane.stop()
        await durable.close()
        await hot_state.close()


async def _ledger(zombie: Zombie) -> list[LedgerEntry]:
    """Every ledger entry of the runs' executions (shared-run and recovery entries too), once."""
    entries: dict[str, LedgerEntry] = {}
    for shared_run_id in zombie.shared_run_ids:
        view = await zombie.plane.run_status(shared_run_id, DEFAULT_TENANT)
        assert view.execution_id is not None
        for query in ({"shared_run_id": shared_run_id}, {"execution_id": view.execution_id}):
            for entry in await zombie.durable.list_ledger(DEFAULT_TENANT.tenant_id, **query):
                entries[entry.entry_id] = entry
    return list(entries.values())


def test_the_woken_zombie_learns_from_its_refused_heartbeat_that_it_was_fenced(zombie: Zombie) -> None:
    """It says so in its log and stops being ready (its readiness names the fenced instance)."""
    assert zombie.runtime_instance_id in zombie.fenced["log"]
    assert "reason=heartbeat refused: unsafe Recovered" in zombie.fenced["log"]
    assert "not running" in zombie.fenced["readiness"]


def test_the_zombie_ends_the_runs_it_held_without_running_them(zombie: Zombie) -> None:
    assert [view.status for view in zombie.zombie_views] == [LocalRunStatus.FAILED] * 2
    assert all((view.failure_reason or "").startswith("taken over") for view in zombie.zombie_views)


async def test_the_zombie_registration_stays_recovered_and_publishes_no_capacity(zombie: Zombie) -> None:
    keys = zombie.plane.parts.registry.keys(zombie.runtime_instance_id)
    redis = zombie.plane.parts.hot_state.redis
    assert await redis.hget(keys.registry, "health") == InstanceHealth.RECOVERED
    assert not await redis.exists(keys.capacity)


async def test_each_run_the_zombie_held_has_one_execution_and_each_step_completed_once(
    zombie: Zombie,
) -> None:
    executions = await executions_per_shared_run(zombie.plane.parts.hot_state)
    assert all(len(executions[s]) == 1 for s in zombie.shared_run_ids), executions
    completed = Counter(
        (e.execution_id, e.step_name) for e in await _ledger(zombie) if e.event == "step.completed"
    )
    assert sorted(completed.values()) == [1] * 6, completed


async def test_the_zombie_claimed_completed_and_started_nothing_after_it_was_marked_unsafe(
    zombie: Zombie,
) -> None:
    unsafe_at = datetime.fromtimestamp(zombie.unsafe_at_ms / 1000, tz=UTC)
    acts = ("step.claimed", "step.completed", "execution.created", "execution.reassigned")
    late = [
        entry
        for entry in await _ledger(zombie)
        if entry.event in acts
        and str(entry.attributes.get("worker_id", "")).startswith(zombie.runtime_instance_id)
        and entry.recorded_at >= unsafe_at
    ]
    assert late == []
    zombie_steps = [
        e
        for e in await _ledger(zombie)
        if str(e.attributes.get("worker_id", "")).startswith(zombie.runtime_instance_id)
    ]
    assert zombie_steps, "the zombie did run steps before it was paused (the ledger names its workers)"
