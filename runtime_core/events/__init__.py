"""Run events: what changed about a run, published through Redis for any process to hear.

Owns the event vocabulary and model (`RunEvent`, deterministic ids for durable events), the
publisher (live pub/sub for every status change and, batched, step progress; the durable
run-event stream for terminal and waiting-for-input events, which webhooks deliver), the
engine observer that turns execution events into run events, and the per-process pub/sub
subscriber that hands events to local listeners. Shared-run transitions are published by
the queueing journal, the end of a run by the runtime instance that closes its local run.
Must not know MCP (the MCP notifications subscribe in `mcp_runtime.notifications`) nor
decide what a consumer does with an event.
"""

from runtime_core.events._keys import EVENT_FIELD, RUN_EVENTS_TAG, RunEventKeys
from runtime_core.events._models import (
    DURABLE_EVENTS,
    PROGRESS_EVENTS,
    STEP_EVENTS,
    TERMINAL_EVENTS,
    UNPARKING_EVENTS,
    RunEvent,
    RunEventType,
    run_event_id,
    terminal_event_id,
)
from runtime_core.events._observer import RunEventObserver
from runtime_core.events._publisher import DEFAULT_STREAM_MAX_LEN, RunEventPublisher
from runtime_core.events._subscriber import RunEventListener, RunEventSubscriber

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Events
    "RunEvent",
    "RunEventType",
    "run_event_id",
    "terminal_event_id",
    "STEP_EVENTS",
    "PROGRESS_EVENTS",
    "TERMINAL_EVENTS",
    "DURABLE_EVENTS",
    "UNPARKING_EVENTS",
    # Publishing
    "RunEventPublisher",
    "RunEventObserver",
    "DEFAULT_STREAM_MAX_LEN",
    # Subscribing
    "RunEventSubscriber",
    "RunEventListener",
    # Redis names
    "RunEventKeys",
    "RUN_EVENTS_TAG",
    "EVENT_FIELD",
]
