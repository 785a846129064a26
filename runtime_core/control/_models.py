"""Execution control vocabulary: statuses, requested actions and the versioned state record.

Owns `ControlStatus`, `ControlAction`, `RuntimeAction` and `ControlState`. Must not read or
write Redis.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class ControlStatus(StrEnum):
    """The effective control state of an execution (separate from its DAG status)."""

    NONE = "None"
    RUNNING = "Running"
    PAUSING = "Pausing"
    PAUSED = "Paused"
    RESUMING = "Resuming"
    CANCELLING = "Cancelling"
    CANCELLED = "Cancelled"
    WAITING_FOR_INPUT = "WaitingForInput"


class ControlAction(StrEnum):
    """The last requested action; None once the runtime settled it (Paused, Running)."""

    NONE = "None"
    PAUSE = "Pause"
    RESUME = "Resume"
    CANCEL = "Cancel"
    WAIT_FOR_INPUT = "WaitForInput"
    SUBMIT_INPUT = "SubmitInput"


class RuntimeAction(StrEnum):
    """Transitions the runtime applies itself when it observes the execution settle."""

    DRAIN = "Drain"  # Pausing -> Paused once nothing is running
    ADVANCE = "Advance"  # Resuming -> Running once work advances again


class ControlState(BaseModel):
    """One execution's control record; `version` 0 means no control action ever happened."""

    model_config = ConfigDict(frozen=True)

    execution_id: str
    status: ControlStatus = ControlStatus.NONE
    action: ControlAction = ControlAction.NONE
    version: int = 0
    waiting_key: str | None = None
    waiting_step: str | None = None
    reason: str = ""
    updated_at_ms: int | None = None

    @classmethod
    def from_fields(cls, execution_id: str, fields: dict[str, str]) -> ControlState:
        """Build from the control hash (missing hash = the initial None state)."""
        return cls(
            execution_id=execution_id,
            status=ControlStatus(fields.get("status", ControlStatus.NONE)),
            action=ControlAction(fields.get("action", ControlAction.NONE)),
            version=int(fields.get("version", 0)),
            waiting_key=fields.get("waiting_key") or None,
            waiting_step=fields.get("waiting_step") or None,
            reason=fields.get("reason", ""),
            updated_at_ms=int(fields["updated_at_ms"]) if fields.get("updated_at_ms") else None,
        )
