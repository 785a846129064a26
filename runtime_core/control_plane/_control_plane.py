"""ControlPlane: the one facade MCP tools and the CLI call for shared runs and instances.

Owns building the parts (`build`, through `build_parts`), starting / stopping the
in-process runtime instances, the background pump, the scale-out watcher and the health /
execution recovery reconcilers, and the caller-facing operations: submit, drain,
list_instances, pause_queue, resume_queue, run_status / cancel (answered by
`RunStatusReader` / `RunCanceller`), list_runs (the lifecycle's run catalog) and its
cluster-wide metrics gauges; it also starts the lifecycle's sweeper and durable purge.
Every operation takes the caller's ExecutionContextSnapshot; every run lookup is
tenant-checked before a local controller is touched. Must not contain MCP code, nor
dispatch or execute except through its parts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from runtime_core.audit import AuditServices
from runtime_core.control_plane._cancellation import RunCanceller
from runtime_core.control_plane._gauges import control_plane_gauges
from runtime_core.control_plane._parts import ControlPlaneParts, build_parts
from runtime_core.control_plane._run_access import RunLocator
from runtime_core.control_plane._run_status import RunStatusReader
from runtime_core.control_plane._settings import ControlPlaneSettings
from runtime_core.control_plane._views import (
    CancelResult,
    DrainedRun,
    DrainResult,
    InstanceView,
    RunStatusView,
)
from runtime_core.dag import DagEngine
from runtime_core.errors import MissingSnapshotError
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    ExecutionCanceller,
    HostManagerSettings,
    QueueStateView,
    RuntimeInstanceSettings,
    TenantSettingsCatalog,
    local_instance_id,
)
from runtime_core.lifecycle import RunListPage, RunListQuery
from runtime_core.observability import METRICS_ENDPOINT_KEY, CachedGauges, ObservabilitySettings
from runtime_core.pipeline import PipelineDefinition
from runtime_core.providers import QueueControlRequest, RuntimeProvider
from runtime_core.queueing import (
    DispatchOutcome,
    DispatchResult,
    PumpIdentity,
    PumpRequest,
    SubmitMode,
    SubmitResult,
)

DrainProgress = Callable[[int, int, str], Awaitable[None]]


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
        self.locator = RunLocator(parts.runs, parts.index, parts.dag_store, parts.durable)
        self._status = RunStatusReader(parts, self.locator)
        self._canceller = RunCanceller(parts, self.locator)
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
        self.parts.lifecycle.start()
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
        await self.parts.lifecycle.stop()
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

    def gauges(self, settings: ObservabilitySettings) -> CachedGauges:
        """The cluster-wide scrape-time gauges (queue depth, shared runs, registered instances)."""
        return control_plane_gauges(self.parts, settings)

    async def metrics_endpoints(self) -> dict[str, dict[str, str]]:
        """Metrics URL of every live runtime-instance process -> labels naming its host (for
        Prometheus service discovery; the instances of one process share one URL)."""
        endpoints: dict[str, dict[str, str]] = {}
        for entry in await self.parts.registry.entries():
            url = entry.descriptor.metadata.get(METRICS_ENDPOINT_KEY)
            if url and entry.live:
                endpoints[url] = {"mcprt_host": entry.descriptor.host}
        return endpoints

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
        return await self._status.read(any_id, _require(snapshot))

    async def cancel(
        self, any_id: str, snapshot: ExecutionContextSnapshot | None, *, reason: str = ""
    ) -> CancelResult:
        return await self._canceller.cancel(any_id, _require(snapshot), reason=reason)

    async def list_runs(self, query: RunListQuery, snapshot: ExecutionContextSnapshot | None) -> RunListPage:
        """The caller's tenant's runs, newest first, still running or archived alike."""
        return await self.parts.lifecycle.catalog.list_runs(_require(snapshot), query)
