"""AuditServices: one place that assembles durability and audit around a DagEngine.

Owns `AuditSettings` and `build_audit_services`, which builds the resolver, the
externalizing codec, retention, snapshots, replay, ledger, trace, forensics, metrics and
queries over one durable store, and the composite observer to attach to the engine. Must
not start or stop the stores it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.audit._batching import DEFAULT_BATCH_SIZE
from runtime_core.audit._checkpoints import ExecutionCheckpoints
from runtime_core.audit._forensics import ForensicsRecorder
from runtime_core.audit._ledger import LedgerRecorder
from runtime_core.audit._metrics import RuntimeMetrics
from runtime_core.audit._metrics_observer import MetricsObserver
from runtime_core.audit._queries import AuditQueries
from runtime_core.audit._replay import ReplayService
from runtime_core.audit._snapshots import SnapshotWriter
from runtime_core.audit._trace import TraceRecorder
from runtime_core.dag import CompositeObserver, DagStore
from runtime_core.retention import (
    DEFAULT_CACHE_BYTES,
    DEFAULT_CACHE_ENTRIES,
    ExternalizationSettings,
    ExternalizingResultCodec,
    PayloadCache,
    PayloadResolver,
    ResultCompactor,
    RetentionEngine,
    RetentionObserver,
    StepArchiver,
)
from runtime_core.storage import DurableStore


class AuditSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    externalization: ExternalizationSettings = Field(default_factory=ExternalizationSettings)
    cache_max_bytes: int = Field(default=DEFAULT_CACHE_BYTES, ge=0)
    cache_max_entries: int = Field(default=DEFAULT_CACHE_ENTRIES, ge=0)
    ledger_batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)
    trace_batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)


@dataclass
class AuditServices:
    store: DurableStore
    metrics: RuntimeMetrics
    resolver: PayloadResolver
    archiver: StepArchiver
    codec: ExternalizingResultCodec
    checkpoints: ExecutionCheckpoints
    snapshots: SnapshotWriter
    replay: ReplayService
    retention: RetentionObserver
    ledger: LedgerRecorder
    trace: TraceRecorder
    forensics: ForensicsRecorder
    queries: AuditQueries
    observer: CompositeObserver

    async def flush(self) -> None:
        await self.ledger.flush()
        await self.trace.flush()

    async def close(self) -> None:
        await self.flush()


def build_audit_services(
    durable_store: DurableStore,
    dag_store: DagStore,
    *,
    instance_id: str,
    settings: AuditSettings | None = None,
    metrics: RuntimeMetrics | None = None,
    retention_engine: RetentionEngine | None = None,
) -> AuditServices:
    """Build everything; attach `.codec` as the engine's `results` and `.observer` as its observer."""
    settings = settings or AuditSettings()
    metrics = metrics or RuntimeMetrics()
    cache = PayloadCache(max_bytes=settings.cache_max_bytes, max_entries=settings.cache_max_entries)
    resolver = PayloadResolver(durable_store, cache, metrics)
    archiver = StepArchiver(durable_store, resolver, metrics)
    checkpoints = ExecutionCheckpoints(dag_store, durable_store, archiver, resolver)
    snapshots = SnapshotWriter(dag_store, durable_store, resolver, checkpoints, metrics)
    retention = RetentionObserver(
        dag_store, retention_engine or RetentionEngine(), ResultCompactor(dag_store, archiver), metrics
    )
    ledger = LedgerRecorder(
        durable_store, dag_store, instance_id=instance_id, batch_size=settings.ledger_batch_size
    )
    trace = TraceRecorder(
        durable_store, dag_store, instance_id=instance_id, batch_size=settings.trace_batch_size
    )
    return AuditServices(
        store=durable_store,
        metrics=metrics,
        resolver=resolver,
        archiver=archiver,
        codec=ExternalizingResultCodec(archiver, resolver, settings.externalization),
        checkpoints=checkpoints,
        snapshots=snapshots,
        replay=ReplayService(dag_store, durable_store, resolver, checkpoints),
        retention=retention,
        ledger=ledger,
        trace=trace,
        forensics=ForensicsRecorder(durable_store, metrics),
        queries=AuditQueries(durable_store, flush_first=[ledger, trace]),
        observer=CompositeObserver(retention, snapshots, ledger, trace, MetricsObserver(metrics)),
    )
