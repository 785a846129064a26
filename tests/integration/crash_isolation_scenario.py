"""Seed 000 multi-tenant runtime crash isolation and its recovery / replay / ledger proof, over
real runtime-instance processes; `test_http_crash_isolation.py` and
`test_grpc_crash_isolation.py` run it once per transport and name one claim per test.

`proof_run` stages the scenario once: one control plane in this process (real Redis, SQLite
under a temporary data directory shared with its children, health + recovery loops, the
scale-out watcher) and three Dedicated runtime-instance processes for tenants A, B and C,
started through the host manager over the transport under test. At crash time A and B each
have 1 in-flight execution held at its crash-threshold step (every step before it Completed
and already in the durable ledger) and 2 runs in their paused local queue; C has 2
executions in flight. A's and B's processes are SIGKILLed; the control plane recovers their
work onto tenant-owned replacement processes it scales out, while C's runs finish. Every
child process is stopped before the evidence is handed to the checks below.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runtime_core.audit import AuditServices, build_audit_services, fingerprint_view
from runtime_core.bootstrap import RuntimeSettings
from runtime_core.control import ExecutionControlService, attach_execution_control
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings, TenantsFile
from runtime_core.dag import DagEngine, DagStore, EngineSettings, ExecutionView, execution_fingerprint
from runtime_core.errors import NotFoundError
from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    AdmissionKind,
    HostedProcess,
    HostLaunch,
    HostManagerSettings,
    HostTransport,
    InstanceHealth,
    IsolationMode,
    LocalRunStatus,
    RunIndexRecord,
    RuntimeHostManager,
)
from runtime_core.pipeline import parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.providers import DispatchRequest
from runtime_core.queueing import PumpIdentity, ScaleOutStatus, SubmitMode
from runtime_core.recovery import RecoveryKind
from runtime_core.steps import ExecutorRegistry, default_executor_registry
from runtime_core.storage import SqliteDurableStore
from tests.helpers import wait_until
from tests.integration.control_plane_support import TENANT_A, TENANT_B, make_engine
from tests.integration.recovery_support import TENANT_C

TENANT_IDS = ("tenant-a", "tenant-b", "tenant-c")
KILLED = ("tenant-a", "tenant-b")
SAFE = "tenant-c"
SNAPSHOTS = {"tenant-a": TENANT_A, "tenant-b": TENANT_B, "tenant-c": TENANT_C}

# start -> pre-1, pre-2 -> hold (crash threshold: waits for the file named by state.gate) ->
# post-1, post-2 -> finish
BEFORE_THRESHOLD = ("start", "pre-1", "pre-2")
THRESHOLD = "hold"
PROOF = parse_pipeline(
    {
        "name": "crash-isolation-proof",
        "steps": [
            {"name": "start", "stepKey": "test.noop"},
            {"name": "pre-1", "stepKey": "test.noop", "dependsOn": ["start"]},
            {"name": "pre-2", "stepKey": "test.noop", "dependsOn": ["start"]},
            {
                "name": THRESHOLD,
                "stepKey": "test.wait_for_file",
                "dependsOn": ["pre-1", "pre-2"],
                "config": {"pathFromState": "gate"},
            },
            {"name": "post-1", "stepKey": "test.noop", "dependsOn": [THRESHOLD]},
            {"name": "post-2", "stepKey": "test.noop", "dependsOn": [THRESHOLD]},
            {"name": "finish", "stepKey": "test.noop", "dependsOn": ["post-1", "post-2"]},
        ],
    }
)
STEP_NAMES = sorted(step.name for step in PROOF.steps)

# Every tenant owns its capacity (Dedicated, no shared fallback) and may run one instance: a
# killed tenant gets exactly one replacement process, created by scale-out.
TENANT_SETTINGS = {
    tenant: {
        "isolationMode": "Dedicated",
        "preferDedicatedCapacity": True,
        "allowSharedFallback": False,
        "maxRuntimeInstances": 1,
        "runtimeInstanceIdPrefix": f"{tenant}-runtime",
        "workerCountPerInstance": 3,
        "maxConcurrentRunsPerInstance": 3,
        "maxLocalWorkersPerExecution": 1,
    }
    for tenant in TENANT_IDS
}

HEARTBEAT_MS = 200
HEALTH_WINDOW_MS = 1_500
SCENARIO_TIMEOUT_S = 30


@dataclass(frozen=True)
class InFlight:
    shared_run_id: str
    local_run_id: str
    execution_id: str


@dataclass
class TenantWork:
    """One tenant's runs: executions in flight at crash time, LocalQueued runs, later runs."""

    snapshot: ExecutionContextSnapshot
    gate: Path
    host: HostedProcess
    in_flight: list[InFlight] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    later: list[str] = field(default_factory=list)

    @property
    def shared_run_ids(self) -> list[str]:
        return [run.shared_run_id for run in self.in_flight] + self.queued + self.later

    @property
    def input(self) -> dict[str, Any]:
        return {"gate": str(self.gate)}


@dataclass
class Proof:
    """What the scenario left behind: its parts (children stopped) and the evidence it kept."""

    transport: HostTransport
    plane: ControlPlane
    audit: AuditServices
    redis_url: str
    work: dict[str, TenantWork]
    staged: dict[str, list[RunIndexRecord]]
    hosts: list[HostedProcess]  # every process started: A, B, C and the replacements
    kill_exit_codes: list[int | None]
    final: dict[str, RunIndexRecord]
    leaked_pids: list[int]
    duration_s: float


# Building blocks


def write_tenants_file(data_dir: Path, tenants: dict[str, Any] | None = None) -> Path:
    path = data_dir / "tenants.json"
    path.write_text(json.dumps({"tenants": tenants or TENANT_SETTINGS}))
    return path


def plane_engine(
    hot_state: HotState, settings: EngineSettings | None = None, executors: ExecutorRegistry | None = None
) -> tuple[DagEngine, ExecutionControlService]:
    """By default the engine settings of the runtime-instance processes (`RuntimeSettings().engine`)."""
    engine = DagEngine(
        DagStore(hot_state),
        executors or default_executor_registry(),
        RetryEngine(),
        settings=settings or RuntimeSettings().engine,
    )
    control = ExecutionControlService(hot_state)
    attach_execution_control(engine, control)
    return engine, control


def build_plane(
    hot_state: HotState,
    durable: SqliteDurableStore,
    redis_url: str,
    data_dir: Path,
    *,
    engine_settings: EngineSettings | None = None,
    tenants: dict[str, Any] | None = None,
    providers_file: Path | None = None,
    executors: ExecutorRegistry | None = None,
    **overrides: Any,
) -> tuple[ControlPlane, AuditServices]:
    """Control plane with audit on the children's SQLite file, fast health and recovery loops
    (`tenants`: the tenants file's settings, default TENANT_SETTINGS; `providers_file`: the
    providers file its runtime-instance children load; `executors`: the plane's own, built from
    that file, for the submit-time checks)."""
    engine, control = plane_engine(hot_state, engine_settings, executors)
    audit = build_audit_services(durable, engine.store, instance_id="control-plane")
    engine.observer, engine.results = audit.observer, audit.codec
    tenants_file = write_tenants_file(data_dir, tenants)
    settings = ControlPlaneSettings(
        host="testhost",
        local_instances=0,
        background_pump=False,  # started once the local queues are staged (see `stage`)
        heartbeat_interval_ms=HEARTBEAT_MS,
        pump_idle_interval_ms=50,
        scale_out_watch_interval_ms=100,
        recovery_enabled=True,
        health_window_ms=HEALTH_WINDOW_MS,
        health_check_interval_ms=100,
        recovery_interval_ms=200,
    ).model_copy(update=overrides)
    hosting = HostManagerSettings(
        redis_url=redis_url,
        redis_prefix=hot_state.prefix,
        data_dir=data_dir,
        host_name="testhost",
        tenants_file=tenants_file,
        providers_file=providers_file,
        heartbeat_interval_ms=HEARTBEAT_MS,
        discovery_timeout_s=2,
        stop_grace_s=10,
    )
    plane = ControlPlane.build(
        hot_state,
        engine,
        control,
        settings,
        tenants=TenantsFile.read(tenants_file).catalog,
        audit=audit,
        hosting=hosting,
    )
    return plane, audit


def hosts(plane: ControlPlane) -> RuntimeHostManager:
    assert plane.parts.hosts is not None
    return plane.parts.hosts


def tenant_launch(transport: HostTransport, tenant_id: str) -> HostLaunch:
    """A and B run one execution at a time (1 run slot), so their other runs stay LocalQueued."""
    return HostLaunch(
        transport=transport,
        tenant_id=tenant_id,
        isolation_mode=IsolationMode.DEDICATED,
        instance_prefix=f"{tenant_id}-runtime",
        pool_size=1,
        worker_count=3,
        max_local_workers_per_execution=1,
        max_concurrent_runs=1 if tenant_id in KILLED else 3,
    )


async def latest(plane: ControlPlane, shared_run_id: str) -> RunIndexRecord:
    record = await plane.parts.index.get_by_shared(shared_run_id)
    assert record is not None, shared_run_id
    return record


async def live_view(plane: ControlPlane, execution_id: str) -> ExecutionView:
    view = await plane.parts.dag_store.read_execution(execution_id)
    assert view is not None, execution_id
    return view


async def start_in_flight(plane: ControlPlane, work: TenantWork) -> str:
    submitted = await plane.submit(PROOF, work.input, SubmitMode.QUEUE_FIRST, work.snapshot)
    return submitted.shared_run_id


async def held_at_threshold(plane: ControlPlane, shared_run_id: str) -> InFlight | None:
    """The run once its execution completed every step before the threshold and runs it."""
    record = await plane.parts.index.get_by_shared(shared_run_id)
    if record is None or record.execution_id is None:
        return None
    view = await plane.parts.dag_store.read_execution(record.execution_id)
    if view is None:
        return None
    status = {s.name: s.status for s in view.steps}
    if status[THRESHOLD] != "Running" or any(status[n] != "Completed" for n in BEFORE_THRESHOLD):
        return None
    return InFlight(shared_run_id, record.local_run_id, record.execution_id)


async def completed_steps_in_ledger(audit: AuditServices, work: TenantWork, execution_id: str) -> list[str]:
    entries = await audit.queries.ledger(work.snapshot, execution_id=execution_id, limit=10_000)
    return sorted(e.step_name or "" for e in entries if e.event == "step.completed")


async def queue_locally(plane: ControlPlane, transport: HostTransport, work: TenantWork) -> str:
    """A shared run delivered into the tenant instance's paused local queue (LocalQueued).

    Dispatch-time admission never offers an instance whose queue is paused or whose run
    slots are taken (its capacity says `can_accept_run = false`), so the pump would keep the
    run in the shared queue. This performs the dispatcher's own steps after admission instead:
    claim the shared item, dispatch through the transport's provider, mark it Dispatched.
    """
    parts = plane.parts
    [runtime_instance_id] = work.host.runtime_instance_ids
    submitted = await plane.submit(PROOF, work.input, SubmitMode.QUEUE_FIRST, work.snapshot)
    claim = await parts.queue.claim_next(
        PumpIdentity(pump_runtime_instance_id="proof-test", pump_worker_id=secrets.token_hex(3))
    )
    assert claim is not None and claim.shared_run_id == submitted.shared_run_id
    run = await parts.runs.get(submitted.shared_run_id)
    assert run is not None
    response = await parts.providers.by_name(transport.value).dispatch(
        DispatchRequest(
            runtime_instance_id=runtime_instance_id,
            shared_run_id=run.shared_run_id,
            pipeline=run.pipeline,
            input=run.input,
            snapshot=run.snapshot,
        )
    )
    assert response.status is LocalRunStatus.QUEUED
    marked = await parts.queue.mark_dispatched(
        run.shared_run_id,
        claim.token,
        {"local_run_id": response.local_run_id, "assigned_runtime_instance_id": runtime_instance_id},
    )
    assert marked.applied
    return run.shared_run_id


# The scenario


async def stage(
    plane: ControlPlane, audit: AuditServices, transport: HostTransport, gates: Path
) -> dict[str, TenantWork]:
    """Three tenant processes; A, B: 1 execution held at the threshold + 2 LocalQueued; C: 2 held."""
    started = await asyncio.gather(
        *(hosts(plane).start_host(tenant_launch(transport, t)) for t in TENANT_IDS)
    )
    work = {
        tenant: TenantWork(SNAPSHOTS[tenant], gates / f"gate-{tenant}", host)
        for tenant, host in zip(TENANT_IDS, started, strict=True)
    }
    in_flight = {t: [await start_in_flight(plane, work[t])] for t in KILLED}
    in_flight[SAFE] = [await start_in_flight(plane, work[SAFE]) for _ in range(2)]
    drained = await plane.drain(10, TENANT_A)  # dispatches every tenant's runs, reports only A's
    assert await plane.parts.queue.pending_count() == 0, drained

    async def all_held() -> bool:
        held = [await held_at_threshold(plane, s) for runs in in_flight.values() for s in runs]
        return all(held)

    await wait_until(all_held, timeout=SCENARIO_TIMEOUT_S, interval=0.05)
    for tenant, shared_run_ids in in_flight.items():
        work[tenant].in_flight = [r for s in shared_run_ids if (r := await held_at_threshold(plane, s))]

    async def durable_before_crash() -> bool:
        """The steps completed before the crash are in the durable ledger (the children's batch)."""
        for tenant in KILLED:
            [run] = work[tenant].in_flight
            if await completed_steps_in_ledger(audit, work[tenant], run.execution_id) != sorted(
                BEFORE_THRESHOLD
            ):
                return False
        return True

    await wait_until(durable_before_crash, timeout=SCENARIO_TIMEOUT_S, interval=0.05)
    for tenant in KILLED:
        [runtime_instance_id] = work[tenant].host.runtime_instance_ids
        await plane.pause_queue(runtime_instance_id, work[tenant].snapshot, reason="stage LocalQueued runs")
        refused = await plane.parts.admission.admit(work[tenant].snapshot)
        assert refused.kind is not AdmissionKind.ASSIGN_TO_INSTANCE, refused  # see queue_locally
        work[tenant].queued = [await queue_locally(plane, transport, work[tenant]) for _ in range(2)]
    return work


async def run_scenario(
    plane: ControlPlane, audit: AuditServices, transport: HostTransport, gates: Path, redis_url: str
) -> Proof:
    started_at = time.monotonic()
    work = await stage(plane, audit, transport, gates)
    staged = {
        t: await plane.parts.index.assigned_to(work[t].host.runtime_instance_ids[0]) for t in TENANT_IDS
    }
    plane.parts.background_pump.start()

    kill_exit_codes = list(
        await asyncio.gather(*(hosts(plane).kill_host(work[t].host.host_id) for t in KILLED))
    )
    work[SAFE].gate.touch()  # the safe tenant goes on while A and B are recovered
    safe = work[SAFE]
    safe.later = [
        (await plane.submit(PROOF, safe.input, SubmitMode.QUEUE_FIRST, safe.snapshot)).shared_run_id
        for _ in range(2)
    ]

    async def resumed_on_replacements() -> bool:
        for tenant in KILLED:
            [run] = work[tenant].in_flight
            record = await latest(plane, run.shared_run_id)
            if record.local_run_id == run.local_run_id or record.status is not LocalRunStatus.RUNNING:
                return False
        return True

    await wait_until(resumed_on_replacements, timeout=SCENARIO_TIMEOUT_S, interval=0.05)
    for tenant in KILLED:
        work[tenant].gate.touch()  # only a replacement can complete the threshold step now

    every_run = [s for w in work.values() for s in w.shared_run_ids]

    async def all_completed() -> bool:
        records = [await latest(plane, s) for s in every_run]
        return all(r.status is LocalRunStatus.COMPLETED for r in records)

    await wait_until(all_completed, timeout=SCENARIO_TIMEOUT_S, interval=0.05)
    return Proof(
        transport=transport,
        plane=plane,
        audit=audit,
        redis_url=redis_url,
        work=work,
        staged=staged,
        hosts=hosts(plane).hosts() + [w.host for w in work.values() if w.host.tenant_id in KILLED],
        kill_exit_codes=kill_exit_codes,
        final={s: await latest(plane, s) for s in every_run},
        leaked_pids=[],
        duration_s=time.monotonic() - started_at,
    )


def hosting_processes(redis_prefix: str) -> list[int]:
    """Pids of live runtime-instance processes started for this key prefix (any parent)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process exited while we looked
            continue
        if b"runtime_core.hosting" in argv and redis_prefix.encode() in argv:
            pids.append(int(cmdline.parent.name))
    return pids


@asynccontextmanager
async def proof_run(
    transport: HostTransport, redis_server: EmbeddedRedis, data_dir: Path
) -> AsyncIterator[Proof]:
    """Run the scenario once; every child is stopped (SIGTERM, then SIGKILL) before the yield."""
    hot_state = connect_hot_state(redis_server.url, prefix=f"proof{secrets.token_hex(4)}:")
    durable = await SqliteDurableStore.open(data_dir / "runtime.db")
    plane, audit = build_plane(hot_state, durable, redis_server.url, data_dir)
    gates = data_dir / "gates"
    gates.mkdir()
    try:
        await plane.start()
        try:
            proof = await run_scenario(plane, audit, transport, gates, redis_server.url)
        finally:
            await plane.stop()
        proof.leaked_pids = hosting_processes(hot_state.prefix)
        print(f"\ncrash isolation proof over {transport.value}: {proof.duration_s:.1f}s")
        yield proof
    finally:
        await audit.close()
        await durable.close()
        await hot_state.close()


# The claims, one per test


async def recovered_work_is_three_runs_per_killed_tenant_and_none_for_the_safe_tenant(proof: Proof) -> None:
    """At crash time A and B each had 1 InFlightExecution + 2 LocalQueued; all 3 were recovered."""
    for tenant in KILLED:
        staged = proof.staged[tenant]
        assert sorted(bool(r.execution_id) for r in staged) == [False, False, True]
        assert sorted(r.status.value for r in staged) == ["Queued", "Queued", "Running"]
    assert len(proof.staged[SAFE]) == 2 and all(r.execution_id for r in proof.staged[SAFE])
    assert proof.kill_exit_codes == [-9, -9]
    for tenant, work in proof.work.items():
        forensics = await proof.audit.queries.forensics(work.snapshot)
        recovered = sorted(f.shared_run_id or "" for f in forensics)
        expected = sorted(work.shared_run_ids) if tenant in KILLED else []
        assert recovered == expected, tenant
    kinds = sorted(f.kind for f in await proof.audit.queries.forensics(TENANT_A))
    assert kinds == [RecoveryKind.IN_FLIGHT_EXECUTION, RecoveryKind.LOCAL_QUEUED, RecoveryKind.LOCAL_QUEUED]


async def recovery_forensics_and_ledger_evidence_exist_only_for_killed_tenants(proof: Proof) -> None:
    counts = {}
    for tenant, work in proof.work.items():
        forensics = await proof.audit.queries.forensics(work.snapshot)
        ledger = await proof.audit.queries.ledger(work.snapshot, limit=10_000)
        recovery_entries = [e for e in ledger if e.event.startswith("runtime.recovery.")]
        dead = work.host.runtime_instance_ids[0]
        assert all(f.runtime_instance_id == dead for f in forensics), tenant
        counts[tenant] = (len(forensics), len(recovery_entries))
    assert counts == {"tenant-a": (3, 3), "tenant-b": (3, 3), "tenant-c": (0, 0)}


async def safe_tenant_runs_complete_on_its_own_instance_with_zero_recovery_records(proof: Proof) -> None:
    safe = proof.work[SAFE]
    [instance] = safe.host.runtime_instance_ids
    for run in safe.in_flight:
        final = proof.final[run.shared_run_id]
        assert (final.local_run_id, final.execution_id) == (run.local_run_id, run.execution_id)
    for shared_run_id in safe.shared_run_ids:
        final = proof.final[shared_run_id]
        assert final.status is LocalRunStatus.COMPLETED and final.runtime_instance_id == instance
        assert final.execution_id is not None
        steps = (await live_view(proof.plane, final.execution_id)).steps
        assert [(s.retry_count, s.recovery_count) for s in steps] == [(0, 0)] * len(steps)
    local_runs = await proof.plane.parts.index.list_tenant(safe.snapshot, limit=100)
    assert len(local_runs) == len(safe.shared_run_ids)  # one local attempt each: none recovered


async def no_ledger_entry_or_id_crosses_tenants(proof: Proof) -> None:
    queries, plane = proof.audit.queries, proof.plane
    for tenant, work in proof.work.items():
        own_runs = set(work.shared_run_ids)
        own_executions = {r.execution_id for r in proof.final.values() if r.tenant_id == tenant}
        ledger = await queries.ledger(work.snapshot, limit=10_000)
        assert ledger and {e.tenant_id for e in ledger} == {tenant}
        assert {e.shared_run_id for e in ledger if e.shared_run_id} <= own_runs
        assert {e.execution_id for e in ledger if e.execution_id} <= own_executions
    foreign_run = proof.work["tenant-a"].in_flight[0]
    own_spans = await queries.trace(TENANT_A, foreign_run.execution_id)
    assert own_spans and {span.tenant_id for span in own_spans} == {"tenant-a"}
    for snapshot in (TENANT_B, TENANT_C):
        assert await queries.ledger(snapshot, execution_id=foreign_run.execution_id) == []
        assert await queries.trace(snapshot, foreign_run.execution_id) == []
        assert await queries.forensics(snapshot, execution_id=foreign_run.execution_id) == []
        for any_id in (foreign_run.shared_run_id, foreign_run.execution_id):
            with pytest.raises(NotFoundError):
                await plane.run_status(any_id, snapshot)
        with pytest.raises(NotFoundError):
            await proof.audit.replay.validate(foreign_run.execution_id, snapshot)


async def reference_fingerprint(proof: Proof, work: TenantWork, execution_id: str) -> str:
    """The same pipeline + input + ExecutionId run uncrashed, in-process, under another prefix."""
    reference_state = connect_hot_state(proof.redis_url, prefix=f"ref{secrets.token_hex(4)}:")
    try:
        engine, _ = make_engine(reference_state)
        await engine.create_execution(PROOF, work.input, work.snapshot, execution_id=execution_id)
        assert await engine.run(execution_id, workers=1) == "Completed"
        view = await engine.store.read_execution(execution_id)
        assert view is not None
        return execution_fingerprint(view)
    finally:
        await reference_state.close()


async def in_flight_executions_finish_with_their_execution_id_and_an_uncrashed_fingerprint(
    proof: Proof,
) -> None:
    for tenant in KILLED:
        work = proof.work[tenant]
        [run] = work.in_flight
        final = proof.final[run.shared_run_id]
        view = await live_view(proof.plane, run.execution_id)
        assert final.execution_id == run.execution_id and final.local_run_id != run.local_run_id
        assert view.meta.status == "Completed"
        recovered = await fingerprint_view(view, proof.audit.resolver)
        assert recovered == await reference_fingerprint(proof, work, run.execution_id)


async def steps_completed_before_the_crash_are_not_re_executed(proof: Proof) -> None:
    """The dead process completed every step before the threshold; the replacement only the rest."""
    for tenant in KILLED:
        work = proof.work[tenant]
        [run] = work.in_flight
        steps = {s.name: s for s in (await live_view(proof.plane, run.execution_id)).steps}
        assert {name: s.retry_count for name, s in steps.items()} == dict.fromkeys(STEP_NAMES, 0)
        assert {name: s.recovery_count for name, s in steps.items()} == {
            **dict.fromkeys(STEP_NAMES, 0),
            THRESHOLD: 1,
        }
        completed = Counter(await completed_steps_in_ledger(proof.audit, work, run.execution_id))
        assert completed == Counter(STEP_NAMES)


async def strict_replay_validation_passes_for_every_recovered_execution(proof: Proof) -> None:
    validated = 0
    for tenant in KILLED:
        work = proof.work[tenant]
        for shared_run_id in work.shared_run_ids:
            execution_id = proof.final[shared_run_id].execution_id
            assert execution_id is not None
            validation = await proof.audit.replay.validate(execution_id, work.snapshot)
            assert validation.valid, (shared_run_id, validation.reason)
            validated += 1
    assert validated == 6


async def recovered_runs_land_on_tenant_owned_replacements_created_by_scale_out(proof: Proof) -> None:
    parts = proof.plane.parts
    for tenant in KILLED:
        work = proof.work[tenant]
        [dead] = work.host.runtime_instance_ids
        replacements = [h for h in proof.hosts if h.tenant_id == tenant and h.host_id != work.host.host_id]
        assert len(replacements) == 1, replacements
        [replacement] = replacements[0].runtime_instance_ids
        assert replacement != dead and replacement.split(":", 1)[1] == f"{tenant}-runtime-1"
        assert replacements[0].transport is proof.transport
        assert {proof.final[s].runtime_instance_id for s in work.shared_run_ids} == {replacement}
        requests = [
            await parts.scale_out.get(f.detail["scale_out_request_id"])
            for f in await proof.audit.queries.forensics(work.snapshot)
        ]
        assert all(r is not None and r.tenant_id == tenant for r in requests)
        fulfilled = [r for r in requests if r is not None and r.status is ScaleOutStatus.FULFILLED]
        assert [r.fulfilled_runtime_instance_id for r in fulfilled] == [replacement]


async def no_runtime_instance_process_outlives_the_scenario(proof: Proof) -> None:
    assert len(proof.hosts) == 5  # A, B, C and one replacement each for A and B
    assert proof.leaked_pids == []
    assert hosts(proof.plane).hosts() == []


# Replacement capacity at the tenant's instance limit


async def scale_out_replaces_an_unsafe_instance_at_the_tenant_instance_limit(
    transport: HostTransport, redis_server: EmbeddedRedis, data_dir: Path
) -> None:
    """maxRuntimeInstances = 1 and the tenant's only instance is Unsafe (killed, not yet
    Recovered): scale-out still starts its replacement, since dead capacity is what it replaces."""
    hot_state = connect_hot_state(redis_server.url, prefix=f"limit{secrets.token_hex(4)}:")
    durable = await SqliteDurableStore.open(data_dir / "runtime.db")
    plane, audit = build_plane(hot_state, durable, redis_server.url, data_dir, recovery_enabled=False)
    try:
        await plane.start()
        dead = await hosts(plane).start_host(tenant_launch(transport, "tenant-a"))
        await hosts(plane).kill_host(dead.host_id)

        async def unsafe() -> bool:
            await plane.parts.health.reconcile_once()
            entries = await plane.parts.registry.entries()
            return [e.health for e in entries] == [InstanceHealth.UNSAFE]

        await wait_until(unsafe, timeout=10, interval=0.05)
        outcome = await hosts(plane).scale_out(transport, plane.parts.tenants.resolve("tenant-a"), TENANT_A)
        entries = {e.runtime_instance_id: e.health for e in await plane.parts.registry.entries()}

        assert outcome.fulfilled, outcome.reason
        assert entries == {
            dead.runtime_instance_ids[0]: InstanceHealth.UNSAFE,
            outcome.runtime_instance_id: InstanceHealth.HEALTHY,
        }
    finally:
        await plane.stop()
        await audit.close()
        await durable.close()
        await hot_state.close()
    assert hosting_processes(hot_state.prefix) == []
