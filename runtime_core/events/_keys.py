"""Redis names of the run events: the live pub/sub channel and the durable event stream.

- `<prefix>events:runs`             pub/sub channel; each message is a JSON list of events
                                    (one publication may carry a batch);
- `<prefix>events:capacity`         pub/sub channel; each message is the id of a runtime
                                    instance whose heartbeat freed capacity;
- `<prefix>{run-events}:stream`     STREAM of the durable events (terminal, waiting for
                                    input), one field `event` holding the event JSON; created
                                    by the webhook service (events are appended only to an
                                    existing stream), entries deleted once consumed, capped at
                                    about `stream_max_len` entries (MAXLEN ~).
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.hot_state import HotState

RUN_EVENTS_TAG = "run-events"
EVENT_FIELD = "event"


@dataclass(frozen=True)
class RunEventKeys:
    hot_state: HotState

    @property
    def channel(self) -> str:
        return self.hot_state.key("events", "runs")

    @property
    def capacity_channel(self) -> str:
        return self.hot_state.key("events", "capacity")

    @property
    def stream(self) -> str:
        return self.hot_state.tagged(RUN_EVENTS_TAG, "stream")
