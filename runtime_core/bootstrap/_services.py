"""EngineServices and RuntimeServices: start, wire and close the runtime's parts.

`EngineServices` is what every process that advances DAGs needs (hot state, engine,
durable store, audit, execution control, the run-event publisher and this process's run-event
subscriber, the agents and the submit path of their child runs, the metrics exposition,
the step / run spans when tracing is on, and the restorer of runs whose hot state Redis
lost): runtime-instance processes use it alone. `RuntimeServices` adds the control plane
(with runtime-instance process hosting and its cluster gauges), the schedules and this
control plane's scheduler, the webhook service (when a
tenant configures webhooks); its control plane's submit path replaces the engine's for child
runs. With the embedded default the data directory is locked for this process (a
second one is refused) and a redis-server a killed predecessor left running is adopted. A
Redis without `appendonly yes` is reported at start, or refused.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from types import TracebackType

from runtime_core.agents import AiAgentExecutor, HotStateChildCanceller, PlaneChildCanceller, QueuedChildRuns
from runtime_core.audit import AuditServices, build_audit_services
from runtime_core.bootstrap._settings import RuntimeSettings
from runtime_core.continuity import HotStateContinuity, QueuedRunCopies
from runtime_core.control import ExecutionControlService, attach_execution_control
from runtime_core.control_plane import ControlPlane, TenantsFile
from runtime_core.dag import CompositeObserver, DagEngine, DagStore, ExecutionObserver
from runtime_core.errors import StoreUnavailableError
from runtime_core.events import RunEventObserver, RunEventPublisher, RunEventSubscriber
from runtime_core.flow import StepRateLimiter
from runtime_core.health import (
    HealthService,
    LoopStates,
    background_loops_alive,
    check_data_dir_writable,
    data_dir_accepts_a_write,
    durable_store_accepts_a_write,
    redis_answers,
)
from runtime_core.hot_state import (
    PERSISTENCE_SETTING,
    DataDirLock,
    EmbeddedRedis,
    HotState,
    check_persistence,
    connect_hot_state,
)
from runtime_core.instances import HostManagerSettings, LocalInstancePool
from runtime_core.observability import (
    MetricsExposition,
    OtelStepTracing,
    WorkflowSpanObserver,
    capacity_gauges,
    tracing_enabled,
)
from runtime_core.pipeline import set_pipeline_limits
from runtime_core.plugins import load_step_plugins
from runtime_core.policy import RetryEngine
from runtime_core.queueing import (
    SharedQueue,
    SharedQueueKeys,
    SharedRunJournal,
    SharedRunStore,
    SharedRuntimeController,
    adopt_recorded_partitions,
)
from runtime_core.scheduling import Scheduling, build_scheduling
from runtime_core.steps import ExecutorRegistry, StepProviders, default_executor_registry
from runtime_core.storage import DurableStore, open_durable_store
from runtime_core.webhooks import WebhookService

log = logging.getLogger("runtime_core.bootstrap")


class EngineServices:
    """`async with EngineServices(settings) as services:` gives a ready engine (no control plane)."""

    def __init__(self, settings: RuntimeSettings, *, observer: ExecutionObserver | None = None) -> None:
        self.settings = settings
        self._observer = observer
        self.embedded_redis: EmbeddedRedis | None = None
        self.redis_url: str
        self.hot_state: HotState
        self.dag_store: DagStore
        self.step_providers: StepProviders
        self.executors: ExecutorRegistry
        self.engine: DagEngine
        self.durable_store: DurableStore
        self.audit: AuditServices
        self.control: ExecutionControlService
        self.restorer: HotStateContinuity
        self.metrics: MetricsExposition
        self.events: RunEventPublisher
        self.run_events: RunEventSubscriber
        self.child_runs: QueuedChildRuns
        # Every part opened so far, closed in reverse order on exit or on a failed start,
        # so a half-started runtime never leaks an embedded redis-server or open stores.
        self._opened = AsyncExitStack()

    async def __aenter__(self) -> EngineServices:
        await self._start(self._open_engine)
        return self

    async def _start(self, *steps: Callable[[], Awaitable[None]]) -> None:
        try:
            for step in steps:
                await step()
        except BaseException:
            await self._opened.aclose()
            raise

    async def _open_engine(self) -> None:
        # First: an unwritable data directory is a typed error naming it, not a traceback from
        # whichever part (redis-server, SQLite) happens to write there first.
        await asyncio.to_thread(check_data_dir_writable, self.settings.data_dir)
        set_pipeline_limits(self.settings.pipeline_limits)
        redis_url = self.settings.redis_url or self._open_embedded_redis()
        self.redis_url = redis_url
        self.hot_state = connect_hot_state(
            redis_url, prefix=self.settings.redis_prefix, partitions=self.settings.queue_partitions
        )
        self._opened.push_async_callback(self.hot_state.close)
        await self.hot_state.ping()
        await self._check_persistence()
        await adopt_recorded_partitions(SharedQueueKeys(self.hot_state))
        self.dag_store = DagStore(self.hot_state)
        provider_settings = self.settings.step_providers()
        self.step_providers = StepProviders.build(provider_settings, self.settings.data_dir)
        self._opened.push_async_callback(self.step_providers.aclose)
        self.executors = default_executor_registry(providers=self.step_providers)
        load_step_plugins(self.executors, self.settings.plugins)
        self.engine = DagEngine(
            self.dag_store,
            self.executors,
            RetryEngine(),
            settings=self.settings.engine,
            observer=self._observer,
        )
        if provider_settings.rate_limits:
            self.engine.rate_limiter = StepRateLimiter(self.hot_state, provider_settings.provider_rate_limits)
        await self._attach_audit()
        self._attach_events()
        self.control = ExecutionControlService(self.hot_state)
        attach_execution_control(self.engine, self.control)
        self._register_agents()
        self.restorer = HotStateContinuity(
            SharedRunStore(self.hot_state), self.audit.replay, self.audit.forensics
        )

    def _register_agents(self) -> None:
        """`ai.agent`, whose pipeline tools run as child runs submitted like any run: through
        this process's submit path (queue-first; a control plane replaces it with its own)."""
        self.child_runs = QueuedChildRuns(
            self._queue_first_submitter(), self.engine, self.durable_store, self.run_events
        )
        # A cancelled agent's child is cancelled through Redis here (a control plane does better).
        self.child_runs.canceller = HotStateChildCanceller(
            self.child_runs.submitter, self.child_runs.index, self.control
        )
        self.executors.register(
            AiAgentExecutor(
                self.step_providers.llm,
                self.dag_store,
                self.executors,
                self.child_runs,
                validate_pipeline=self.engine.validate,
            )
        )

    def _queue_first_submitter(self) -> SharedRuntimeController:
        """The submit path of a process without a control plane: the same checks, rate limits,
        concurrency keys, durable copy and journal as a control plane's; every run queued first
        (the control planes' pumps hear its `run.queued` event)."""
        runs, queue = SharedRunStore(self.hot_state), SharedQueue(self.hot_state)
        journal = SharedRunJournal(self.audit.ledger, self.events)
        copies = QueuedRunCopies(self.audit.store, runs, queue, self.audit.ledger, journal)
        return SharedRuntimeController(
            runs,
            queue,
            journal,
            validate=self.engine.validate,
            check_input=self.engine.check_input,
            keep_copy=copies.keep,
            rate_limits=TenantsFile.read(self.settings.control_plane.tenants_file).rate_limits,
            check_for_tenant=self.engine.check_for_tenant,
        )

    def _open_embedded_redis(self) -> str:
        """Lock the data directory, then start its redis-server (or adopt a killed owner's)."""
        lock = DataDirLock(self.settings.data_dir).acquire()
        self._opened.callback(lock.release)
        self.embedded_redis = EmbeddedRedis(self.settings.data_dir / "redis").start()
        self._opened.callback(self.embedded_redis.stop)
        event = "redis.embedded_adopted" if self.embedded_redis.adopted else "redis.embedded_started"
        log.info("%s url=%s pid=%s", event, self.embedded_redis.url, self.embedded_redis.pid)
        return self.embedded_redis.url

    async def _check_persistence(self) -> None:
        report = await check_persistence(self.hot_state)
        if report.durable:
            return
        message = (
            f"Redis does not persist its dataset ({report.detail}): a Redis restart loses the hot "
            f"state of every active run. Set `{PERSISTENCE_SETTING} yes` (with appendfsync everysec)."
        )
        if self.settings.require_redis_persistence and report.appendonly is False:
            raise StoreUnavailableError(
                message, hint="Or unset MCP_RUNTIME_REQUIRE_REDIS_PERSISTENCE to start anyway."
            )
        log.warning("redis.not_persistent setting=%s %s", PERSISTENCE_SETTING, message)

    async def _attach_audit(self) -> None:
        """Durable store, payload externalization, retention, snapshots, ledger, trace, metrics."""
        durable = self.settings.durable_store()
        self.durable_store = await open_durable_store(durable)
        log.info("durable_store.opened store=%s", durable.describe())
        self._opened.push_async_callback(self.durable_store.close)
        self.audit = build_audit_services(
            self.durable_store, self.dag_store, instance_id=self.engine.instance_id
        )
        self._opened.push_async_callback(self.audit.close)
        self.engine.results = self.audit.codec
        self.engine.check_retention = self.audit.retention.engine.validate
        self.engine.observer = CompositeObserver(self.audit.observer, self.engine.observer)
        self.metrics = MetricsExposition(self.audit.metrics.registry)
        if tracing_enabled():  # with tracing off nothing is attached: no cost per step
            self.engine.step_tracing = OtelStepTracing()
            self.engine.observer = CompositeObserver(
                WorkflowSpanObserver(self.dag_store), self.engine.observer
            )

    def export_capacity_of(self, pool: LocalInstancePool) -> None:
        """Add the capacity gauges of the runtime instances `pool` hosts to `metrics`."""
        instances = pool.instances
        self.metrics.add_gauges(
            capacity_gauges(lambda: [i.capacity() for i in instances()], self.settings.observability)
        )

    def health(self, loops: LoopStates | None = None) -> HealthService:
        """Liveness / readiness of this process: Redis, durable store, data directory, `loops`."""
        checks = {
            "redis": redis_answers(self.hot_state),
            "durable_store": durable_store_accepts_a_write(self.durable_store),
            "data_dir": data_dir_accepts_a_write(self.settings.data_dir),
        }
        if loops is not None:
            checks["background_loops"] = background_loops_alive(loops)
        return HealthService(checks)

    def _attach_events(self) -> None:
        """Run events of the executions (after the audit observer: once a run is announced
        waiting or ended, its ledger and trace are written)."""
        self.events = RunEventPublisher(self.hot_state)
        self._opened.push_async_callback(self.events.aclose)
        self.run_events = RunEventSubscriber(self.hot_state)  # started by its first listener
        self._opened.push_async_callback(self.run_events.aclose)
        self.engine.observer = CompositeObserver(
            self.engine.observer, RunEventObserver(self.events, self.dag_store)
        )

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._opened.aclose()


class RuntimeServices(EngineServices):
    """`async with RuntimeServices(settings) as services:` gives a ready engine and control plane."""

    def __init__(self, settings: RuntimeSettings, *, observer: ExecutionObserver | None = None) -> None:
        super().__init__(settings, observer=observer)
        self.control_plane: ControlPlane
        self.scheduling: Scheduling
        self.webhooks: WebhookService | None = None

    async def __aenter__(self) -> RuntimeServices:
        await self._start(
            self._open_engine, self._open_control_plane, self._open_scheduling, self._open_notifications
        )
        return self

    async def _open_control_plane(self) -> None:
        self.control_plane = ControlPlane.build(
            self.hot_state,
            self.engine,
            self.control,
            self.settings.control_plane,
            workers=self.settings.workers,
            audit=self.audit,
            hosting=self.hosting_settings(),
            restorer=self.restorer,
            events=self.events,
        )
        self._opened.push_async_callback(self.control_plane.stop)
        self.child_runs.submitter = self.control_plane.parts.controller  # its pump wakes at once
        self.child_runs.canceller = PlaneChildCanceller(self.control_plane.cancel)  # every state of a run
        self.export_capacity_of(self.control_plane.parts.pool)
        self.metrics.add_gauges(self.control_plane.gauges(self.settings.observability))
        await self.control_plane.start()

    async def _open_scheduling(self) -> None:
        """The schedule service and this control plane's scheduler (stopped before the control plane)."""
        self.scheduling = build_scheduling(
            self.hot_state, self.durable_store, self.control_plane, self.settings.scheduling
        )
        self._opened.push_async_callback(self.scheduling.stop)
        self.scheduling.start()

    def health(self, loops: LoopStates | None = None) -> HealthService:
        """As the engine's, plus the control plane's, the scheduler's and the webhook loops."""
        return super().health(loops or self.background_loops)

    def background_loops(self) -> dict[str, bool]:
        loops = {**self.control_plane.background_loops(), **self.scheduling.loops_alive()}
        if self.webhooks is not None:
            loops.update(self.webhooks.loops_alive())
        return loops

    async def _open_notifications(self) -> None:
        """When a tenant configures webhooks, the webhook fan-out and delivery loops."""
        parts = self.control_plane.parts
        if parts.webhooks.enabled:
            consumer = f"{self.settings.control_plane.control_plane_id}:{os.getpid()}"
            self.webhooks = WebhookService(
                self.hot_state, parts.webhooks, parts.runs, consumer=consumer, metrics=self.audit.metrics
            )
            self._opened.push_async_callback(self.webhooks.stop)
            await self.webhooks.start()

    def hosting_settings(self) -> HostManagerSettings:
        """Runtime-instance processes share this Redis (and prefix) and data directory."""
        return HostManagerSettings(
            redis_url=self.redis_url,
            redis_prefix=self.settings.redis_prefix,
            data_dir=self.settings.data_dir,
            host_name=self.settings.control_plane.host,
            tenants_file=self.settings.control_plane.tenants_file,
            step_plugins=self.settings.plugins,
            providers_file=self.settings.providers_file,
            heartbeat_interval_ms=self.settings.control_plane.heartbeat_interval_ms,
        )
