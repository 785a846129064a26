"""Execution control: versioned control state per ExecutionId, the claim gate and human input.

Owns the control hash of an execution (status, action, version, waiting key/step, reason),
updated only through `lua/control_cas.lua` by expected version; the caller-facing
`ExecutionControlService` (pause, resume, cancel, wait for input, submit input, get; every
call tenant-checked against the execution's stored snapshot) and the engine hooks installed
by `attach_execution_control` (park for input, read submitted input, settle Pausing ->
Paused and Resuming -> Running). The DAG claim scripts enforce the gate itself: no claim
while Pausing, Paused, WaitingForInput, Cancelling or Cancelled.
"""

from runtime_core.control._engine_bridge import EngineControlBridge, attach_execution_control
from runtime_core.control._models import ControlAction, ControlState, ControlStatus, RuntimeAction
from runtime_core.control._service import MAX_INPUT_BYTES, ExecutionControlService
from runtime_core.control._store import CasOutcome, CasResult, ControlStore

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Service
    "ExecutionControlService",
    "attach_execution_control",
    "EngineControlBridge",
    "MAX_INPUT_BYTES",
    # State
    "ControlAction",
    "ControlState",
    "ControlStatus",
    "RuntimeAction",
    # Store
    "CasOutcome",
    "CasResult",
    "ControlStore",
]
