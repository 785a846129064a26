"""ControlPlane: the one facade MCP tools and the CLI call for shared runs and instances.

Owns wiring the queueing, instances, providers and recovery parts into one object
(`build`), starting / stopping the in-process runtime instances, the background pump, the
scale-out watcher and the health / execution recovery reconcilers, and the caller-facing
operations: submit, drain, list_instances, run_status, cancel, pause_queue, resume_queue.
Every operation takes the caller's ExecutionContextSnapshot; every run lookup is
tenant-checked before a local controller is touched. Must not contain MCP code, nor
dispatch or execute except through its parts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from runtime_core.audit import AuditServices
from runtime_core.control_plane._run_access import LocatedRun, RunLocator
from runtime_core.control_plane._settings import ControlPlaneSettings
from runtime_core.control_plane._views import (
    CancelResult,
    DrainedRun,
    DrainResult,
    InstanceView,
    RunStatusView,
    StepRow,
)
from runtime_core.dag import DagEngine, DagStore, ExecutionView
from runtime_core.errors import ConflictError, MissingSnapshotError, RuntimeCoreError, StoreUnavailableError
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.instances import (
    AdmissionController,
    ControlPlaneDiscovery,
    ExecutionCanceller,
    HostManagerSettings,
    InstanceDependencies,
    InstanceRegistry,
    LocalInstancePool,
    LocalInstanceScaler,
    LocalRunStatus,
    LocalRunView,
    QueueStateView,
    ReservationStore,
    RunExecutionIndex,
    RunIndexRecord,
    RuntimeHostManager,
    RuntimeInstanceSettings,
    TenantSettingsCatalog,
    local_instance_id,
)
from runtime_core.pipeline import PipelineDefinition
from runtime_core.providers import (
    CancelRunRequest,
    GrpcRuntimeProvider,
    HttpRuntimeProvider,
    LocalRuntimeProvider,
    ProviderSelector,
    QueueControlRequest,
    RunRef,
    RuntimeProvider,
)
from runtime_core.queueing import (
    BackgroundPump,
    DispatchOutcome,
    DispatchResult,
    FulfilledRunRequeue,
    PumpIdentity,
    PumpRequest,
    QueueOutcome,
    ReadinessGate,
    RunDelivery,
    ScaleOutRequestStore,
    ScaleOutWatcher,
    SharedQueue,
    SharedQueueDispatcher,
    SharedQueuePump,
    SharedRunJournal,
    SharedRunStatus,
    SharedRunStore,
    SharedRuntimeController,
    SubmitMode,
    SubmitResult,
)
from runtime_core.recovery import (
    ExecutionRecoveryReconciler,
    InstanceHealthStore,
    RecoveryDependencies,
    RecoveryEvidence,
    RecoveryLoops,
    RecoverySettings,
    RuntimeHealthReconciler,
)

DrainProgress = Callable[[int, int, str], Awaitable[None]]

_CANCELLABLE_SHARED = (
    SharedRunStatus.SUBMITTED,
    SharedRunStatus.QUEUED_GLOBALLY,
    SharedRunStatus.SCALE_OUT_REQUESTED,
)


@dataclass
class ControlPlaneParts:
    """Every collaborator, exposed for tests, the CLI and future providers (HTTP, gRPC)."""

    hot_state: HotState
    dag_store: DagStore
    engine: DagEngine
    tenants: TenantSettingsCatalog
    registry: InstanceRegistry
    index: RunExecutionIndex
    pool: LocalInstancePool
    scaler: LocalInstanceScaler
    providers: ProviderSelector
    admission: AdmissionController
    runs: SharedRunStore
    queue: SharedQueue
    dispatcher: SharedQueueDispatcher
    pump: SharedQueuePump
    gate: ReadinessGate
    background_pump: BackgroundPump
    scale_out: ScaleOutRequestStore
    watcher: ScaleOutWatcher
    controller: SharedRuntimeController
    canceller: ExecutionCanceller
    health: RuntimeHealthReconciler
    recovery: ExecutionRecoveryReconciler
    recovery_loops: RecoveryLoops
    discovery: ControlPlaneDiscovery
    hosts: RuntimeHostManager | None = None


def build_parts(
    hot_state: HotState,
    engine: DagEngine,
    canceller: ExecutionCanceller,
    settings: ControlPlaneSettings,
    *,
    tenants: TenantSettingsCatalog | None = None,
    audit: AuditServices | None = None,
    hosting: HostManagerSettings | None = None,
) -> ControlPlaneParts:
    """Wire every part; `hosting` lets HTTP / gRPC scale-out start runtime-instance processes."""
    if tenants is None:
        tenants = (
            TenantSettingsCatalog.from_file(settings.tenants_file)
            if settings.tenants_file
            else TenantSettingsCatalog()
        )
    registry = InstanceRegistry(hot_state, tenants, stale_after_ms=settings.instance_stale_after_ms)
    index = RunExecutionIndex(hot_state)
    pool = LocalInstancePool(InstanceDependencies(engine, registry, index, canceller))
    scaler = LocalInstanceScaler(
        pool, host=settings.host, heartbeat_interval_ms=settings.heartbeat_interval_ms
    )
    hosts = RuntimeHostManager(registry, hosting) if hosting else None
    providers = ProviderSelector(
        [
            LocalRuntimeProvider(pool, scaler),
            HttpRuntimeProvider(registry, hosts=hosts),
            GrpcRuntimeProvider(registry, hosts=hosts),
        ]
    )
    admission = AdmissionController(registry, scale_out_enabled=settings.scale_out_enabled)
    runs, queue = SharedRunStore(hot_state), SharedQueue(hot_state, claim_lease_ms=settings.claim_lease_ms)
    reservations = ReservationStore(hot_state, stale_after_ms=settings.instance_stale_after_ms)
    delivery = RunDelivery(
        reservations,
        providers,
        reservation_ttl_ms=settings.reservation_ttl_ms,
        journal=SharedRunJournal(audit.ledger if audit else None),
    )
    dispatcher = SharedQueueDispatcher(runs, queue, admission, delivery)
    pump = SharedQueuePump(dispatcher)
    gate = ReadinessGate(registry, poll_interval_ms=settings.pump_idle_interval_ms)
    background = BackgroundPump(
        pump,
        gate,
        PumpIdentity(pump_runtime_instance_id=settings.control_plane_id, pump_worker_id="background-pump"),
        batch_size=settings.pump_batch_size,
        idle_interval_ms=settings.pump_idle_interval_ms,
    )
    scale_out = ScaleOutRequestStore(hot_state)
    requeue = FulfilledRunRequeue(runs, queue, on_requeued=background.wake)
    watcher = ScaleOutWatcher(
        scale_out, providers, requeue, watcher_id=f"{settings.control_plane_id}/scale-out"
    )
    controller = SharedRuntimeController(
        runs,
        queue,
        admission,
        delivery,
        scale_out,
        validate=engine.validate,
        on_enqueued=background.wake,
    )
    recovery_settings = RecoverySettings(
        health_window_ms=settings.health_window_ms,
        claim_lease_ms=settings.claim_lease_ms,
        reconciler_id=f"{settings.control_plane_id}/recovery",
    )
    health = RuntimeHealthReconciler(InstanceHealthStore(registry), window_ms=settings.health_window_ms)
    recovery = ExecutionRecoveryReconciler(
        RecoveryDependencies(
            registry=registry,
            index=index,
            admission=admission,
            runs=runs,
            queue=queue,
            scale_out=scale_out,
            dag_store=engine.store,
            evidence=RecoveryEvidence(
                audit.forensics if audit else None,
                audit.ledger if audit else None,
                reconciler_id=recovery_settings.reconciler_id,
            ),
        ),
        recovery_settings,
        on_requeued=background.wake,
    )
    return ControlPlaneParts(
        hot_state=hot_state,
        dag_store=engine.store,
        engine=engine,
        tenants=tenants,
        registry=registry,
        index=index,
        pool=pool,
        scaler=scaler,
        providers=providers,
        admission=admission,
        runs=runs,
        queue=queue,
        dispatcher=dispatcher,
        pump=pump,
        gate=gate,
        background_pump=background,
        scale_out=scale_out,
        watcher=watcher,
        controller=controller,
        canceller=canceller,
        health=health,
        recovery=recovery,
        recovery_loops=RecoveryLoops(
            health,
            recovery,
            health_interval_ms=settings.health_check_interval_ms,
            recovery_interval_ms=settings.recovery_interval_ms,
        ),
        discovery=ControlPlaneDiscovery(hot_state),
        hosts=hosts,
    )


def _require(snapshot: ExecutionContextSnapshot | None) -> ExecutionContextSnapshot:
    if snapshot is None:
        raise MissingSnapshotError(
            "This operation needs the caller's ExecutionContextSnapshot.",
            hint="Capture it from the authenticated principal.",
        )
    return snapshot


class ControlPlane:
    def __init__(self, parts: ControlPlaneParts, settings: ControlPlaneSettings, *, workers: int = 4) -> None:
        self.parts = parts
        self.settings = settings
        self.workers = workers
        self.locator = RunLocator(parts.runs, parts.index, parts.dag_store)
        self._stop = asyncio.Event()
        self._watcher_task: asyncio.Task[None] | None = None

    @classmethod
    def build(
        cls,
        hot_state: HotState,
        engine: DagEngine,
        canceller: ExecutionCanceller,
        settings: ControlPlaneSettings | None = None,
        *,
        workers: int = 4,
        tenants: TenantSettingsCatalog | None = None,
        audit: AuditServices | None = None,
        hosting: HostManagerSettings | None = None,
    ) -> ControlPlane:
        """`audit` (optional) receives the recovery forensics and ledger evidence; `hosting`
        (optional) enables runtime-instance processes for HTTP / gRPC scale-out."""
        settings = settings or ControlPlaneSettings()
        parts = build_parts(
            hot_state, engine, canceller, settings, tenants=tenants, audit=audit, hosting=hosting
        )
        return cls(parts, settings, workers=workers)

    # Lifecycle

    async def start(self) -> ControlPlane:
        """Publish discovery; start in-process instances, pump, scale-out watcher and reconcilers."""
        await self.parts.discovery.publish(self.settings.control_plane_id, self.settings.host)
        for n in range(1, self.settings.local_instances + 1):
            await self.parts.pool.start_instance(self.local_instance_settings(n))
        if self.settings.background_pump:
            self.parts.background_pump.start()
        if self.settings.recovery_enabled:
            self.parts.recovery_loops.start()
        self._stop.clear()
        self._watcher_task = asyncio.create_task(
            self.parts.watcher.run_forever(self._stop, interval_ms=self.settings.scale_out_watch_interval_ms)
        )
        return self

    def local_instance_settings(self, n: int) -> RuntimeInstanceSettings:
        s = self.settings
        workers = s.workers_per_instance or self.workers
        return RuntimeInstanceSettings(
            runtime_instance_id=local_instance_id(s.host, "runtime-instance", n),
            host=s.host,
            worker_count=workers,
            max_local_workers_per_execution=s.max_local_workers_per_execution or workers,
            max_concurrent_runs=s.max_concurrent_runs_per_instance,
            local_queue_capacity=s.local_queue_capacity,
            heartbeat_interval_ms=s.heartbeat_interval_ms,
        )

    async def stop(self) -> None:
        self._stop.set()
        await self.parts.recovery_loops.stop()
        await self.parts.background_pump.stop()
        if self._watcher_task is not None:
            await asyncio.gather(self._watcher_task, return_exceptions=True)
            self._watcher_task = None
        if self.parts.hosts is not None:
            await self.parts.hosts.stop_all()
        await self.parts.pool.stop_all()
        await self.parts.providers.aclose()
        await self.parts.discovery.withdraw(self.settings.control_plane_id)

    # Submit and drain

    async def submit(
        self,
        pipeline: PipelineDefinition,
        input: dict[str, Any],
        mode: SubmitMode | None,
        snapshot: ExecutionContextSnapshot | None,
        *,
        provider_hint: str | None = None,
    ) -> SubmitResult:
        """Refuses an oversized or non-JSON input before anything is queued (the engine's limits)."""
        self.parts.engine.check_input(input)
        return await self.parts.controller.submit(
            pipeline, input, mode or self.settings.default_submit_mode, snapshot, provider_hint=provider_hint
        )

    async def drain(
        self,
        max_count: int,
        snapshot: ExecutionContextSnapshot | None,
        progress: DrainProgress | None = None,
        *,
        stop_on_failure: bool = False,
    ) -> DrainResult:
        """Manual drain: pump identity is this control plane; each run's own snapshot drives admission."""
        caller = _require(snapshot)
        identity = PumpIdentity(
            pump_runtime_instance_id=self.settings.control_plane_id, pump_worker_id=f"drain:{caller.user_id}"
        )

        async def report(done: int, result: DispatchResult) -> None:
            if progress is not None:
                await progress(done, max_count, self._progress_message(result, caller))

        result = await self.parts.pump.pump(
            PumpRequest(max_dispatch_count=max_count, stop_on_failure=stop_on_failure, pump=identity),
            progress=report,
        )
        attempts = result.attempts
        return DrainResult(
            attempted=len(attempts),
            dispatched=len(result.dispatched),
            failed=sum(a.outcome is DispatchOutcome.FAILED for a in attempts),
            no_capacity=sum(a.outcome is DispatchOutcome.NO_CAPACITY for a in attempts),
            stop_reason=result.stop_reason.value,
            pending_after=await self.parts.queue.pending_count(),
            runs=[self._drained(a) for a in attempts if a.tenant_id == caller.tenant_id and a.shared_run_id],
        )

    @staticmethod
    def _progress_message(result: DispatchResult, caller: ExecutionContextSnapshot) -> str:
        if result.tenant_id != caller.tenant_id:
            return result.outcome.value
        return (
            f"{result.outcome.value} {result.shared_run_id} -> {result.assigned_runtime_instance_id or '-'}"
        )

    @staticmethod
    def _drained(result: DispatchResult) -> DrainedRun:
        assert result.shared_run_id is not None
        return DrainedRun(
            shared_run_id=result.shared_run_id,
            outcome=result.outcome.value,
            assigned_runtime_instance_id=result.assigned_runtime_instance_id,
            local_run_id=result.local_run_id,
            reason=result.reason,
        )

    # Instances

    async def list_instances(self, snapshot: ExecutionContextSnapshot | None) -> list[InstanceView]:
        caller = _require(snapshot)
        return [InstanceView.of(entry) for entry in await self.parts.registry.visible_entries(caller)]

    async def pause_queue(
        self, runtime_instance_id: str, snapshot: ExecutionContextSnapshot | None, *, reason: str = ""
    ) -> QueueStateView:
        caller = _require(snapshot)
        provider = await self._visible_provider(runtime_instance_id, caller)
        request = QueueControlRequest(
            runtime_instance_id=runtime_instance_id, reason=reason, requested_by=caller.user_id
        )
        return await provider.pause_queue(request)

    async def resume_queue(
        self, runtime_instance_id: str, snapshot: ExecutionContextSnapshot | None
    ) -> QueueStateView:
        caller = _require(snapshot)
        provider = await self._visible_provider(runtime_instance_id, caller)
        return await provider.resume_queue(
            QueueControlRequest(runtime_instance_id=runtime_instance_id, requested_by=caller.user_id)
        )

    async def _visible_provider(
        self, runtime_instance_id: str, caller: ExecutionContextSnapshot
    ) -> RuntimeProvider:
        entry = await self.parts.registry.visible_entry(runtime_instance_id, caller)
        return self.parts.providers.for_instance(entry.descriptor)

    # Run status and cancel

    async def run_status(self, any_id: str, snapshot: ExecutionContextSnapshot | None) -> RunStatusView:
        located = await self.locator.locate(any_id, _require(snapshot))
        with restored_snapshot(located.snapshot):
            view = RunStatusView(requested_id=any_id, tenant_id=located.snapshot.tenant_id)
            await self._fill_shared(view, located)
            if located.local is not None:
                self._fill_local(view, await self._local_view(located.local))
            if located.execution_id:
                await self._fill_execution(view, located.execution_id, located.snapshot)
        return view

    async def _fill_shared(self, view: RunStatusView, located: LocatedRun) -> None:
        shared = located.shared
        if shared is None:
            return
        item = await self.parts.queue.item(shared.shared_run_id)
        view.shared_run_id = shared.shared_run_id
        view.shared_status = shared.status.value
        view.queue_status = item.status.value if item else None
        view.submit_mode = shared.submit_mode.value
        view.assigned_runtime_instance_id = shared.assigned_runtime_instance_id
        view.pump_runtime_instance_id = shared.pump_runtime_instance_id
        view.pump_worker_id = shared.pump_worker_id
        view.scale_out_request_id = shared.scale_out_request_id
        view.failure_reason = shared.failure_reason

    @staticmethod
    def _fill_local(view: RunStatusView, local: LocalRunView) -> None:
        view.local_run_id = local.local_run_id
        view.shared_run_id = view.shared_run_id or local.shared_run_id
        view.local_status = local.status.value
        view.effective_workers = local.effective_workers or None
        view.execution_id = local.execution_id
        view.failure_reason = local.failure_reason or view.failure_reason

    async def _local_view(self, record: RunIndexRecord) -> LocalRunView:
        """Ask the owning instance (index already checked the tenant); fall back to the index."""
        try:
            descriptor = await self.parts.registry.descriptor(record.runtime_instance_id)
            provider = self.parts.providers.for_instance(descriptor)
            return await provider.run_status(
                RunRef(runtime_instance_id=record.runtime_instance_id, local_run_id=record.local_run_id)
            )
        except StoreUnavailableError:
            raise
        except RuntimeCoreError:
            pass  # instance unregistered or unreachable: the index record is the answer
        return LocalRunView(
            local_run_id=record.local_run_id,
            shared_run_id=record.shared_run_id,
            runtime_instance_id=record.runtime_instance_id,
            status=record.status,
            execution_id=record.execution_id,
            failure_reason=record.failure_reason,
            created_at_ms=record.created_at_ms,
            started_at_ms=record.started_at_ms,
            completed_at_ms=record.completed_at_ms,
        )

    async def _fill_execution(
        self, view: RunStatusView, execution_id: str, snapshot: ExecutionContextSnapshot
    ) -> None:
        execution = await self.parts.dag_store.read_execution(execution_id)
        view.execution_id = execution_id
        if execution is None:
            return
        view.execution_status = execution.meta.status
        view.control_status = execution.control_status
        view.steps = [
            StepRow(
                name=s.name,
                step_key=s.step_key,
                status=s.status,
                retry_count=s.retry_count,
                recovery_count=s.recovery_count,
            )
            for s in execution.steps
        ]
        if execution.meta.status != "Running":
            view.result = await self._sink_results(execution, snapshot)

    async def _sink_results(self, execution: ExecutionView, snapshot: ExecutionContextSnapshot) -> Any:
        feeding = {dep for step in execution.meta.pipeline.steps for dep in step.depends_on}
        sinks = {s.name: s.result for s in execution.steps if s.name not in feeding and s.result is not None}
        decoded = await self.parts.engine.results.decode(execution.meta.execution_id, sinks, snapshot)
        return next(iter(decoded.values())) if len(decoded) == 1 else decoded

    async def cancel(
        self, any_id: str, snapshot: ExecutionContextSnapshot | None, *, reason: str = ""
    ) -> CancelResult:
        caller = _require(snapshot)
        located = await self.locator.locate(any_id, caller)
        reason = reason or f"cancelled by {caller.user_id}"
        with restored_snapshot(located.snapshot):
            if located.shared is not None and located.shared.status in _CANCELLABLE_SHARED:
                result = await self._cancel_shared(any_id, located, reason, caller)
                if result is not None:
                    return result
                located = await self.locator.locate(any_id, caller)
            if located.local is not None:
                if located.local.status.is_terminal:
                    raise ConflictError(
                        f"Run '{any_id}' is already {located.local.status.value}; "
                        "there is nothing left to cancel.",
                        hint="Read run.status for its outcome; submit again to run it anew.",
                    )
                return await self._cancel_local(any_id, located, located.local, reason, caller)
            if located.shared is None and located.execution_id:
                await self.parts.canceller.cancel(located.execution_id, located.snapshot, reason=reason)
                return CancelResult(
                    requested_id=any_id,
                    execution_id=located.execution_id,
                    message="execution cancellation requested",
                )
        status = located.shared.status.value if located.shared else "unknown"
        raise ConflictError(f"Run '{any_id}' is {status}; there is nothing left to cancel.")

    async def _cancel_shared(
        self, any_id: str, located: LocatedRun, reason: str, caller: ExecutionContextSnapshot
    ) -> CancelResult | None:
        assert located.shared is not None
        transition = await self.parts.queue.cancel(
            located.shared.shared_run_id, reason=reason, requested_by=caller.user_id
        )
        if transition.outcome is QueueOutcome.BUSY:
            raise ConflictError(
                f"Shared run '{located.shared.shared_run_id}' is being dispatched right now.",
                hint="Retry the cancellation in a moment.",
            )
        if not transition.applied:
            return None  # dispatched meanwhile: cancel the local run instead
        await self.parts.controller.delivery.journal.record(
            located.shared, "cancelled", reason=reason, requested_by=caller.user_id
        )
        return CancelResult(
            requested_id=any_id,
            shared_run_id=located.shared.shared_run_id,
            shared_status=SharedRunStatus.CANCELLED.value,
            message="shared run cancelled before dispatch; no LocalRunId or ExecutionId was created",
        )

    async def _cancel_local(
        self,
        any_id: str,
        located: LocatedRun,
        local: RunIndexRecord,
        reason: str,
        caller: ExecutionContextSnapshot,
    ) -> CancelResult:
        entry = next(
            (
                e
                for e in await self.parts.registry.entries()
                if e.runtime_instance_id == local.runtime_instance_id
            ),
            None,
        )
        if entry is None:
            raise ConflictError(
                f"Runtime instance '{local.runtime_instance_id}' of run '{any_id}' is gone.",
                hint="Its execution is recovered by the recovery reconciler; cancel it by ExecutionId.",
            )
        view = await self.parts.providers.for_instance(entry.descriptor).cancel_run(
            CancelRunRequest(
                runtime_instance_id=local.runtime_instance_id,
                local_run_id=local.local_run_id,
                reason=reason,
                requested_by=caller.user_id,
            )
        )
        return CancelResult(
            requested_id=any_id,
            shared_run_id=local.shared_run_id,
            local_run_id=local.local_run_id,
            execution_id=view.execution_id,
            shared_status=located.shared.status.value if located.shared else None,
            local_status=view.status.value,
            message=_local_cancel_message(view),
        )


def _local_cancel_message(view: LocalRunView) -> str:
    if view.status is LocalRunStatus.RUNNING:
        return "execution cancellation requested"
    if view.status is LocalRunStatus.CANCELLED and view.execution_id is None:
        return "queued run cancelled; no ExecutionId was created"
    return f"run already {view.status.value}; nothing left to cancel"
