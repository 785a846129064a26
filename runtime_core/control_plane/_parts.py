"""ControlPlaneParts: every collaborator of the control plane, and `build_parts` that wires them.

Owns the assembly of the queueing, instances, providers, recovery and lifecycle parts from
one `ControlPlaneSettings` (which store, which admission, which reconcilers, when finished
runs leave Redis, the run-event publisher of the journal and the in-process instances, the
tenants file's sections). Must not start anything nor hold operations: `ControlPlane` starts
the parts, its readers answer queries.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.audit import AuditServices
from runtime_core.continuity import QueuedRunCopies
from runtime_core.control_plane._settings import ControlPlaneSettings
from runtime_core.control_plane._tenants_file import TenantsFile
from runtime_core.dag import DagEngine, DagStore
from runtime_core.events import RunEventPublisher, RunEventSubscriber
from runtime_core.hot_state import HotState
from runtime_core.identity import new_incarnation_id
from runtime_core.instances import (
    AdmissionController,
    ControlPlaneDiscovery,
    ExecutionCanceller,
    HostManagerSettings,
    InstanceDependencies,
    InstanceRegistry,
    LocalInstancePool,
    LocalInstanceScaler,
    LostStateRestorer,
    ReservationStore,
    RunExecutionIndex,
    RuntimeHostManager,
    TenantSettingsCatalog,
    UnparkDoorbell,
)
from runtime_core.lifecycle import Lifecycle, LifecycleStores, build_lifecycle
from runtime_core.providers import (
    GrpcRuntimeProvider,
    HttpRuntimeProvider,
    LocalRuntimeProvider,
    ProviderSelector,
)
from runtime_core.queueing import (
    BackgroundPump,
    DirectAdmission,
    FulfilledRunRequeue,
    PumpIdentity,
    ReadinessGate,
    RunDelivery,
    ScaleOutRequestStore,
    ScaleOutWatcher,
    SharedQueue,
    SharedQueueDispatcher,
    SharedQueuePump,
    SharedRunJournal,
    SharedRunStore,
    SharedRuntimeController,
)
from runtime_core.recovery import (
    DurableSnapshots,
    ExecutionRecoveryReconciler,
    InstanceHealthStore,
    RecoveryDependencies,
    RecoveryEvidence,
    RecoveryLoops,
    RecoverySettings,
    RuntimeHealthReconciler,
)
from runtime_core.storage import DurableStore
from runtime_core.webhooks import WebhookSettings


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
    lifecycle: Lifecycle
    webhooks: WebhookSettings
    events: RunEventPublisher | None = None
    # This start of the control plane: its pumps' claims carry it (see SharedQueue).
    incarnation: str = ""
    hosts: RuntimeHostManager | None = None
    durable: DurableStore | None = None
    # The durable copies of submitted runs (with a durable store): what requeues queued runs
    # after Redis lost its dataset.
    queued_copies: QueuedRunCopies | None = None


def build_parts(
    hot_state: HotState,
    engine: DagEngine,
    canceller: ExecutionCanceller,
    settings: ControlPlaneSettings,
    *,
    tenants: TenantSettingsCatalog | None = None,
    audit: AuditServices | None = None,
    hosting: HostManagerSettings | None = None,
    restorer: LostStateRestorer | None = None,
    events: RunEventPublisher | None = None,
    webhooks: WebhookSettings | None = None,
) -> ControlPlaneParts:
    """Wire every part; `hosting` lets HTTP / gRPC scale-out start runtime-instance processes;
    `restorer` restores the runs of in-process instances after a lost Redis dataset; `events`
    publishes run events; `tenants` and `webhooks` default to the tenants file's sections (the
    file is read once, its rate limits go to the controller)."""
    tenants_file = TenantsFile.read(settings.tenants_file)
    tenants = tenants_file.catalog if tenants is None else tenants
    webhooks = tenants_file.webhook_settings() if webhooks is None else webhooks
    incarnation = new_incarnation_id()
    registry = InstanceRegistry(hot_state, tenants, stale_after_ms=settings.instance_stale_after_ms)
    index = RunExecutionIndex(hot_state)

    def wake_pump() -> None:  # the background pump is built from the pool's providers below
        background.wake()

    pool = LocalInstancePool(
        InstanceDependencies(
            engine,
            registry,
            index,
            canceller,
            restorer=restorer,
            events=events,
            on_capacity=wake_pump,
            doorbell=UnparkDoorbell(RunEventSubscriber(hot_state) if events is not None else None),
        )
    )
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
    admission = AdmissionController(
        registry, scale_out_enabled=settings.scale_out_enabled, reachable=providers.reaches
    )
    runs, queue = SharedRunStore(hot_state), SharedQueue(hot_state, claim_lease_ms=settings.claim_lease_ms)
    reservations = ReservationStore(hot_state, stale_after_ms=settings.instance_stale_after_ms)
    journal = SharedRunJournal(audit.ledger if audit else None, events)
    index.key_release = queue.release_key  # a run holding a concurrency key's slot ends
    delivery = RunDelivery(
        reservations, providers, reservation_ttl_ms=settings.reservation_ttl_ms, journal=journal, index=index
    )
    copies = QueuedRunCopies(audit.store, runs, queue, audit.ledger, journal) if audit else None
    capacity_signals = RunEventSubscriber(hot_state)
    dispatcher = SharedQueueDispatcher(runs, queue, admission, delivery, capacity_signals=capacity_signals)
    pump = SharedQueuePump(dispatcher)
    gate = ReadinessGate(registry, poll_interval_ms=settings.pump_idle_interval_ms)
    background = BackgroundPump(
        pump,
        gate,
        PumpIdentity(
            pump_runtime_instance_id=settings.control_plane_id,
            pump_worker_id="background-pump",
            incarnation=incarnation,
        ),
        batch_size=settings.pump_batch_size,
        idle_interval_ms=settings.pump_idle_interval_ms,
        capacity_signals=capacity_signals,
    )
    scale_out = ScaleOutRequestStore(hot_state)
    requeue = FulfilledRunRequeue(runs, queue, on_requeued=background.wake)
    watcher = ScaleOutWatcher(
        scale_out, providers, requeue, watcher_id=f"{settings.control_plane_id}/scale-out"
    )
    controller = SharedRuntimeController(
        runs,
        queue,
        journal,
        validate=engine.validate,
        direct=DirectAdmission(admission, delivery, scale_out),
        check_input=engine.check_input,
        on_enqueued=background.wake,
        keep_copy=copies.keep if copies else None,
        rate_limits=tenants_file.rate_limits,
        check_for_tenant=engine.check_for_tenant,
    )
    recovery_settings = RecoverySettings(
        health_window_ms=settings.health_window_ms,
        claim_lease_ms=settings.claim_lease_ms,
        # A dispatch reserved before a takeover is delivered within the reservation TTL.
        predecessor_grace_ms=settings.reservation_ttl_ms,
        fence_retention_ms=settings.fence_retention_ms,
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
            archive=DurableSnapshots(audit.store) if audit else None,
            evidence=RecoveryEvidence(
                audit.forensics if audit else None,
                audit.ledger if audit else None,
                reconciler_id=recovery_settings.reconciler_id,
            ),
            events=events,
        ),
        recovery_settings,
        on_requeued=background.wake,
    )
    lifecycle = _lifecycle(LifecycleStores(runs, queue, index, engine.store, scale_out), settings, audit)
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
        lifecycle=lifecycle,
        webhooks=webhooks,
        events=events,
        incarnation=incarnation,
        hosts=hosts,
        durable=audit.store if audit else None,
        queued_copies=copies,
    )


def _lifecycle(
    stores: LifecycleStores, settings: ControlPlaneSettings, audit: AuditServices | None
) -> Lifecycle:
    """Archiving needs the durable store; a replay's restored execution is dropped again after the grace."""
    if audit is None:
        return build_lifecycle(stores, settings.lifecycle)
    lifecycle = build_lifecycle(stores, settings.lifecycle, durable=audit.store, snapshots=audit.snapshots)
    audit.replay.on_restored = lifecycle.schedule.restored
    return lifecycle
