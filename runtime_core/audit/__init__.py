"""Audit and proof: terminal snapshots, replay, fingerprints, ledger, trace, forensics, metrics.

Owns the normalized execution document and terminal snapshots (written once at
finalization), Replay(ExecutionId) through `lua/restore_execution.lua` and strict replay
validation, the resolved-result fingerprint, the batched append-only ledger, OpenTelemetry-
compatible trace spans, recovery forensics, Prometheus metrics on a dedicated registry, the
tenant-scoped audit queries, and `build_audit_services`, which wires all of it (with
payload externalization and retention) around a DagEngine. Must not advance executions.
"""

from runtime_core.audit._checkpoints import ExecutionCheckpoints, ExecutionHeader
from runtime_core.audit._document import (
    ExecutionDocument,
    StepDocument,
    document_json,
    view_from_document,
)
from runtime_core.audit._fingerprints import fingerprint_view, resolve_view, stored_results
from runtime_core.audit._forensics import ForensicsRecorder
from runtime_core.audit._ledger import FLUSH_EVENTS, RUN_IDENTITY_FIELDS, WORKER_COUNT_FIELDS, LedgerRecorder
from runtime_core.audit._metrics import RuntimeMetrics
from runtime_core.audit._metrics_observer import MetricsObserver
from runtime_core.audit._queries import AuditQueries
from runtime_core.audit._replay import ReplayResult, ReplayService, ReplaySource, ReplayValidation
from runtime_core.audit._restore import RestoreOutcome, restore_execution, restore_plan
from runtime_core.audit._snapshots import SnapshotWriter
from runtime_core.audit._trace import TraceRecorder, execution_span_id, trace_id_for
from runtime_core.audit._wiring import AuditServices, AuditSettings, build_audit_services

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Assembly
    "AuditServices",
    "AuditSettings",
    "build_audit_services",
    # Snapshots, fingerprints and replay
    "SnapshotWriter",
    "ExecutionDocument",
    "StepDocument",
    "document_json",
    "view_from_document",
    "fingerprint_view",
    "resolve_view",
    "stored_results",
    "ExecutionCheckpoints",
    "ExecutionHeader",
    "ReplayService",
    "ReplayResult",
    "ReplaySource",
    "ReplayValidation",
    "RestoreOutcome",
    "restore_execution",
    "restore_plan",
    # Ledger, trace, forensics
    "LedgerRecorder",
    "FLUSH_EVENTS",
    "RUN_IDENTITY_FIELDS",
    "WORKER_COUNT_FIELDS",
    "TraceRecorder",
    "trace_id_for",
    "execution_span_id",
    "ForensicsRecorder",
    "AuditQueries",
    # Metrics
    "RuntimeMetrics",
    "MetricsObserver",
]
