"""The Redis DAG store (Lua-backed transitions) and the DAG engine.

Owns the hot state of executions (step statuses, claim tokens, leases, retries, results),
ready-step evaluation, the worker loop, convergence, idempotent finalization and the
terminal fingerprint. Must not know about queues or tenants beyond the snapshot it is
given, and never writes the state a Lua script guards from Python.
"""

from runtime_core.dag._claimed import OUTPUT_EVENT, OUTPUT_MAX_BYTES, ClaimHandle, read_live_output
from runtime_core.dag._engine import DagEngine
from runtime_core.dag._engine_settings import (
    PARKED_CONTROL_STATUSES,
    SUPERSEDED_STATUS,
    AssistanceHook,
    EngineSettings,
    InlineResults,
    ResultCodec,
)
from runtime_core.dag._events import (
    LIVE_EVENTS,
    CompositeObserver,
    EngineEvent,
    ExecutionObserver,
    NullObserver,
)
from runtime_core.dag._explain import StepError, WaitingInput, failing_step, failure_summary
from runtime_core.dag._fingerprint import execution_fingerprint
from runtime_core.dag._keys import BLOCKING_CONTROL_STATUSES, ExecutionKeys
from runtime_core.dag._operations import ClaimOperations, operations_in_doubt, restore_operation
from runtime_core.dag._pages import ExecutionPages, ExecutionSummary
from runtime_core.dag._records import (
    ClaimBatch,
    ClaimOutcome,
    DropOutcome,
    ExecutionMeta,
    ExecutionStatus,
    ExecutionView,
    Finalization,
    FinalizeOutcome,
    FirstClaim,
    ReadyView,
    ReassignOutcome,
    ReassignResult,
    StepClaim,
    StepStatus,
    StepView,
    TransitionOutcome,
    TransitionResult,
)
from runtime_core.dag._step_tracing import NoStepTracing, StepTracing
from runtime_core.dag._store import DagStore
from runtime_core.dag._worker_permits import WorkerPermits

__all__ = [
    "BLOCKING_CONTROL_STATUSES",
    "LIVE_EVENTS",
    "OUTPUT_EVENT",
    "OUTPUT_MAX_BYTES",
    "PARKED_CONTROL_STATUSES",
    "SUPERSEDED_STATUS",
    "AssistanceHook",
    "ClaimBatch",
    "ClaimHandle",
    "ClaimOperations",
    "ClaimOutcome",
    "CompositeObserver",
    # Engine
    "DagEngine",
    # Store
    "DagStore",
    "DropOutcome",
    "EngineEvent",
    "EngineSettings",
    "ExecutionKeys",
    "ExecutionMeta",
    "ExecutionObserver",
    "ExecutionPages",
    "ExecutionStatus",
    "ExecutionSummary",
    "ExecutionView",
    "Finalization",
    "FinalizeOutcome",
    "FirstClaim",
    "InlineResults",
    "NoStepTracing",
    "NullObserver",
    "ReadyView",
    "ReassignOutcome",
    "ReassignResult",
    "ResultCodec",
    "StepClaim",
    "StepError",
    "StepStatus",
    "StepTracing",
    "StepView",
    "TransitionOutcome",
    "TransitionResult",
    "WaitingInput",
    "WorkerPermits",
    # Proof
    "execution_fingerprint",
    # Explaining failures and waits
    "failing_step",
    "failure_summary",
    # Operations of steps (side effects that survive uncertainty)
    "operations_in_doubt",
    # Live output of streaming steps
    "read_live_output",
    # Operations put back after a lost dataset
    "restore_operation",
]
