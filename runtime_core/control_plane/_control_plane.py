"""ControlPlane: the one facade MCP tools and the CLI call for shared runs and instances.

Owns building the parts (`build`, through `build_parts`), starting / stopping the
in-process runtime instances, the background pump, the scale-out watcher, the dataset watch
(a lost Redis dataset is logged, discovery re-published and the runs that were only queued
queued again from their durable copies; that requeue also runs once after every start, for a
dataset lost while no control plane ran) and the health / execution
recovery reconcilers (a start expires the queue claims its killed predecessor left), and
the caller-facing operations: submit, list_instances, queue_depth, pause_queue, resume_queue,
drain / run_status / run_pipeline / cancel (answered by `RunDrainer` / `RunStatusReader` /
`RunPipelineReader` / `RunCanceller`), list_runs (the lifecycle's run catalog) and its
cluster-wide metrics gauges; it also starts the lifecycle's sweeper and durable purge.
Every operation takes the caller's ExecutionContextSnapshot; every run lookup is
tenant-checked before a local controller is touched. Must not contain MCP code, nor
dispatch or execute except through its parts.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from runtime_core.audit import AuditServices
from runtime_core.continuity import DatasetWatch, LostRunOutcome
from runtime_core.control_plane._cancellation import RunCanceller
from runtime_core.control_plane._drain import DrainProgress, RunDrainer
from runtime_core.control_plane._gauges import control_plane_gauges
from runtime_core.control_plane._idempotent_answer import archived_submit_result
from runtime_core.control_plane._key_evictions import KeyEvictions
from runtime_core.control_plane._parts import ControlPlaneParts, build_parts
from runtime_core.control_plane._run_access import RunLocator
from runtime_core.control_plane._run_data import RunDataReader
from runtime_core.control_plane._run_pipeline import RunPipelineReader
from runtime_core.control_plane._run_status import RunStatusReader
from runtime_core.control_plane._settings import ControlPlaneSettings
from runtime_core.control_plane._views import (
    CancelResult,
    DrainResult,
    InstanceView,
    RunStatusView,
    StepPage,
    TenantCapacityView,
)
from runtime_core.dag import DagEngine
from runtime_core.errors import MissingSnapshotError, NotFoundError
from runtime_core.events import RunEventPublisher
from runtime_core.flow import ConcurrencyKey, checked_priority
from runtime_core.hot_state import HotState, retry_while_unavailable
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    ExecutionCanceller,
    HostManagerSettings,
    LostStateRestorer,
    QueueStateView,
    RuntimeInstanceSettings,
    TenantSettingsCatalog,
    local_instance_id,
)
from runtime_core.lifecycle import RunListPage, RunListQuery, RunStatusCounts
from runtime_core.observability import METRICS_ENDPOINT_KEY, CachedGauges, ObservabilitySettings
from runtime_core.pipeline import PipelineDefinition
from runtime_core.providers import QueueControlRequest, RuntimeProvider
from runtime_core.queueing import IdempotencyKey, IdempotentRunGoneError, SubmitMode, SubmitResult
from runtime_core.webhooks import WebhookSettings, check_callback


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
        self._pipelines = RunPipelineReader(self.locator, parts.dag_store)
        self.run_data = RunDataReader(parts, self.locator)  # a run's input and step outputs (views)
        self._canceller = RunCanceller(parts, self.locator)
        self._drainer = RunDrainer(parts, settings.control_plane_id)
        parts.controller.on_key_evictions = KeyEvictions(self._canceller)
        self._stop = asyncio.Event()
        self._watcher_task: asyncio.Task[None] | None = None
        self.dataset_watch = DatasetWatch(
            parts.hot_state, on_lost=[self._publish_discovery, self._requeue_lost_queued_runs]
        )
        self._dataset_task: asyncio.Task[None] | None = None
        self._start_requeue_task: asyncio.Task[None] | None = None

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
        restorer: LostStateRestorer | None = None,
        events: RunEventPublisher | None = None,
        webhooks: WebhookSettings | None = None,
    ) -> ControlPlane:
        """`audit` (optional) receives the recovery forensics and ledger evidence; `hosting`
        (optional) enables runtime-instance processes for HTTP / gRPC scale-out; `restorer`
        (optional) restores in-process instances' runs after a lost Redis dataset; `events`
        (optional) publishes run events; `webhooks` overrides the tenants file's section."""
        settings = settings or ControlPlaneSettings()
        parts = build_parts(
            hot_state,
            engine,
            canceller,
            settings,
            tenants=tenants,
            audit=audit,
            hosting=hosting,
            restorer=restorer,
            events=events,
            webhooks=webhooks,
        )
        return cls(parts, settings, workers=workers)

    # Lifecycle

    async def start(self) -> ControlPlane:
        """Publish discovery; start in-process instances, pump, scale-out watcher and reconcilers.

        Queue claims this control plane's previous life left (it was killed mid-dispatch) are
        expired first, so their runs are settled and dispatched now, not after the claim lease.
        """
        await self.dataset_watch.join()
        await self._publish_discovery()
        await self.parts.queue.expire_claims_of_earlier_lives(
            f"{self.settings.control_plane_id}/", self.parts.incarnation
        )
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
        self._dataset_task = asyncio.create_task(
            self.dataset_watch.run_forever(self._stop, interval_ms=self.settings.health_check_interval_ms)
        )
        # A dataset lost while no control plane ran changed no epoch anyone saw: settle the
        # durable copies of queued runs once now (a no-op for every run whose record is there).
        self._start_requeue_task = asyncio.create_task(
            retry_while_unavailable(self._requeue_lost_queued_runs, "control_plane.requeue_lost")
        )
        return self

    async def _publish_discovery(self) -> None:
        await self.parts.discovery.publish(self.settings.control_plane_id, self.settings.host)

    async def _requeue_lost_queued_runs(self) -> None:
        """After the grace (instances restore the runs they hold, other processes flush their
        ledgers), queue again the runs that were only queued when Redis lost its dataset."""
        copies = self.parts.queued_copies
        if copies is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), self.settings.lost_run_requeue_grace_ms / 1000)
        if not self._stop.is_set() and (await copies.requeue_lost())[LostRunOutcome.REQUEUED]:
            self.parts.background_pump.wake()

    def background_loops(self) -> dict[str, bool]:
        """Each background loop this control plane is configured to run: alive or not."""
        loops = {
            "scale_out_watcher": self._watcher_task is not None and not self._watcher_task.done(),
            "dataset_watch": self._dataset_task is not None and not self._dataset_task.done(),
            "runtime_instances": self.parts.pool.loops_alive(),
        }
        if self.settings.background_pump:
            loops["pump"] = self.parts.background_pump.alive
        if self.settings.recovery_enabled:
            loops.update(self.parts.recovery_loops.alive())
        loops.update(self.parts.lifecycle.loops_alive())
        return loops

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
        await self.parts.dispatcher.delivery.aclose()  # recordings still waiting for Redis
        if self._start_requeue_task is not None:
            self._start_requeue_task.cancel()  # it may be waiting for Redis to come back
        tasks = (self._watcher_task, self._dataset_task, self._start_requeue_task)
        await asyncio.gather(*(task for task in tasks if task is not None), return_exceptions=True)
        self._watcher_task = self._dataset_task = self._start_requeue_task = None
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
        idempotency_key: str | None = None,
        callback_url: str | None = None,
        priority: int | None = None,
        concurrency: ConcurrencyKey | None = None,
    ) -> SubmitResult:
        """Refuses an oversized or non-JSON input, a `callback_url` the tenant does not
        allow-list, or a priority outside 1-9, before anything is queued. An `idempotency_key`
        the caller's tenant used within `idempotency_window_ms` returns the run it made (same
        pipeline and input) or an `idempotency_conflict` (another request); nothing new is
        submitted. `priority` and `concurrency`: docs/flow-control.md."""
        caller = _require(snapshot)
        priority = checked_priority(priority)
        if callback_url is not None:
            check_callback(self.parts.webhooks, caller.tenant_id, callback_url)
        idempotency = (
            IdempotencyKey.for_request(
                idempotency_key, pipeline, input, window_ms=self.settings.idempotency_window_ms
            )
            if idempotency_key is not None
            else None
        )
        try:
            return await self.parts.controller.submit(
                pipeline,
                input,
                mode or self.settings.default_submit_mode,
                caller,
                provider_hint=provider_hint,
                idempotency=idempotency,
                callback_url=callback_url,
                priority=priority,
                concurrency=concurrency,
            )
        except IdempotentRunGoneError as gone:  # finished and retired: its durable record answers
            try:
                view = await self._status.read(gone.shared_run_id, caller)
            except NotFoundError:
                raise gone from None
            return archived_submit_result(gone, view)

    async def drain(
        self,
        max_count: int,
        snapshot: ExecutionContextSnapshot | None,
        progress: DrainProgress | None = None,
        *,
        stop_on_failure: bool = False,
    ) -> DrainResult:
        """Manual drain: pump identity is this control plane; each run's own snapshot drives admission.

        The pump dispatches runs of every tenant, but the caller learns only of its own tenant's
        (progress, counts, pending), and other tenants' runs never record the caller's user.
        """
        return await self._drainer.drain(
            max_count, _require(snapshot), progress, stop_on_failure=stop_on_failure
        )

    # Instances

    async def list_instances(self, snapshot: ExecutionContextSnapshot | None) -> list[InstanceView]:
        caller = _require(snapshot)
        return [InstanceView.of(entry) for entry in await self.parts.registry.visible_entries(caller)]

    async def tenant_capacity(self, snapshot: ExecutionContextSnapshot | None) -> list[TenantCapacityView]:
        """The instances visible to the caller's tenant, without other tenants' activity."""
        caller = _require(snapshot)
        entries = await self.parts.registry.visible_entries(caller)
        return [TenantCapacityView.of(entry, caller.tenant_id) for entry in entries]

    async def queue_depth(self, snapshot: ExecutionContextSnapshot | None) -> int:
        """How many of the caller's tenant's runs wait in the shared queue (Pending items)."""
        caller = _require(snapshot)
        return (await self.parts.queue.pending_count_by_tenant())[caller.tenant_id]

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

    async def run_status(
        self, any_id: str, snapshot: ExecutionContextSnapshot | None, steps: StepPage | None = None
    ) -> RunStatusView:
        """The run's status with its steps' counts and the rows of `steps` (default: the first
        page of DEFAULT_STEP_PAGE_SIZE)."""
        return await self._status.read(any_id, _require(snapshot), steps)

    async def run_pipeline(
        self, any_id: str, snapshot: ExecutionContextSnapshot | None
    ) -> PipelineDefinition | None:
        """The DAG a run executes (None once its hot state is gone); tenant-checked like run_status."""
        return await self._pipelines.read(any_id, _require(snapshot))

    async def cancel(
        self, any_id: str, snapshot: ExecutionContextSnapshot | None, *, reason: str = ""
    ) -> CancelResult:
        return await self._canceller.cancel(any_id, _require(snapshot), reason=reason)

    async def list_runs(self, query: RunListQuery, snapshot: ExecutionContextSnapshot | None) -> RunListPage:
        """The caller's tenant's runs, newest first, still running or archived alike."""
        return await self.parts.lifecycle.catalog.list_runs(_require(snapshot), query)

    async def count_runs(
        self, query: RunListQuery, snapshot: ExecutionContextSnapshot | None
    ) -> RunStatusCounts:
        """The caller's tenant's runs per status under a listing's filters (status aside)."""
        return await self.parts.lifecycle.catalog.count_runs(_require(snapshot), query)
