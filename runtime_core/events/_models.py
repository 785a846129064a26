"""Run events: what changed about one run, as published to subscribers and webhooks.

Owns the event vocabulary (`RunEventType`), the event model with its identities (tenant,
SharedRunId, LocalRunId, ExecutionId) and its id. Terminal and waiting-for-input events get
a deterministic id (derived from the run and the transition), so the same transition
published twice (a retried write, a recovered run finishing) is one event to a consumer
that de-duplicates by id. Must not publish anything.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

EVENT_ID_PREFIX = "evt_"


class RunEventType(StrEnum):
    # The shared run (control plane)
    SUBMITTED = "run.submitted"
    QUEUED = "run.queued"
    DISPATCHED = "run.dispatched"
    REQUEUED = "run.requeued"
    SCALE_OUT_REQUESTED = "run.scale_out_requested"
    REJECTED = "run.rejected"
    # The execution (engine)
    STARTED = "run.started"
    PAUSED = "run.paused"
    RESUMED = "run.resumed"
    # Control asked for by a caller (the engine applies it once the run advances again)
    RESUME_REQUESTED = "run.resume_requested"
    INPUT_SUBMITTED = "run.input_submitted"
    CANCEL_REQUESTED = "run.cancel_requested"
    WAITING_FOR_INPUT = "run.waiting_for_input"
    STEP_COMPLETED = "run.step_completed"
    STEP_FAILED = "run.step_failed"
    # A streaming step wrote more of its output (`output`: the new text)
    STEP_OUTPUT = "run.step_output"
    # More steps are ready than the run's workers: idle runtime instances may assist it
    ASSISTANCE_WANTED = "run.assistance_wanted"
    # The end of the run (its local run closed, or a shared run cancelled before dispatch)
    COMPLETED = "run.completed"
    FAILED = "run.failed"
    CANCELLED = "run.cancelled"


STEP_EVENTS = frozenset({RunEventType.STEP_COMPLETED, RunEventType.STEP_FAILED, RunEventType.STEP_OUTPUT})
"""Progress within a run: published lazily in batches, never durable."""

PROGRESS_EVENTS = STEP_EVENTS | {RunEventType.ASSISTANCE_WANTED}
"""Within a run, nothing a subscriber of the run must re-read it for: step progress, and a wish
for assistance (what wakes idle runtime instances). Published lazily in batches, never durable."""

TERMINAL_EVENTS = frozenset(
    {RunEventType.COMPLETED, RunEventType.FAILED, RunEventType.CANCELLED, RunEventType.REJECTED}
)

UNPARKING_EVENTS = frozenset(
    {RunEventType.RESUME_REQUESTED, RunEventType.INPUT_SUBMITTED, RunEventType.CANCEL_REQUESTED}
)
"""A paused or input-waiting run may advance again: its runtime instance stops waiting."""

DURABLE_EVENTS = TERMINAL_EVENTS | {RunEventType.WAITING_FOR_INPUT}
"""Also appended to the durable run-event stream that webhooks deliver from."""


class RunEvent(BaseModel):
    """One change of one run. `status` is the new status of the identity that changed."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    type: RunEventType
    tenant_id: str
    shared_run_id: str | None = None
    local_run_id: str | None = None
    execution_id: str | None = None
    status: str | None = None
    step: str | None = None
    waiting_key: str | None = None
    reason: str | None = None
    output: str | None = None
    at_ms: int = Field(default_factory=lambda: int(time.time() * 1000))

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_EVENTS

    @property
    def durable(self) -> bool:
        return self.type in DURABLE_EVENTS

    @property
    def progress(self) -> bool:
        """Within the run (see PROGRESS_EVENTS): run subscribers are not notified of it."""
        return self.type in PROGRESS_EVENTS


def run_event_id(event_type: RunEventType, *identity: str | None) -> str:
    """The event id: deterministic for a durable event (same run + transition -> same id)."""
    if event_type not in DURABLE_EVENTS:
        return EVENT_ID_PREFIX + secrets.token_hex(16)
    material = "\x1f".join([event_type.value, *(part or "" for part in identity)])
    return EVENT_ID_PREFIX + hashlib.sha256(material.encode()).hexdigest()[:32]


def terminal_event_id(event_type: RunEventType, shared_run_id: str | None, local_run_id: str | None) -> str:
    """One end per run: keyed by its SharedRunId (else its LocalRunId), whatever attempt ended it."""
    return run_event_id(event_type, shared_run_id or local_run_id)
