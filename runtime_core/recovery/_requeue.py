"""Putting a shared run dispatched to an Unsafe instance back on the normal dispatch path.

Owns the typed wrapper of `shared_recover` (the only place that knows its KEYS/ARGV order):
the run becomes QueuedGlobally with a Pending item (the pump re-admits it under its own
snapshot) or ScaleOutRequested, keeping its SharedRunId and, for an in-flight execution,
carrying `resume_execution_id`. Must not choose capacity or dispatch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from runtime_core.hot_state import HotState
from runtime_core.queueing import SharedQueueKeys, SharedRunStatus


class RunRecoveryOutcome(Enum):
    RECOVERED = 1
    ALREADY_RECOVERED = 2
    REFUSED = 0
    MISSING = -1


@dataclass(frozen=True)
class RunRecovery:
    outcome: RunRecoveryOutcome
    now_ms: int
    current_status: SharedRunStatus | None = None


class SharedRunRecovery:
    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self.keys = SharedQueueKeys(hot_state)

    async def recover(
        self,
        shared_run_id: str,
        *,
        runtime_instance_id: str,
        local_run_id: str,
        target: SharedRunStatus,
        resume_execution_id: str | None,
        fields: dict[str, str],
    ) -> RunRecovery:
        """Only while the run is still Dispatched to `runtime_instance_id` as `local_run_id`."""
        k = self.keys.of_run(shared_run_id)
        reply = await self.hot_state.scripts["shared_recover"](
            keys=[k.run(shared_run_id), *k.queue_keys],
            args=[
                shared_run_id,
                runtime_instance_id,
                local_run_id,
                target.value,
                resume_execution_id or "",
                json.dumps(fields),
            ],
        )
        status = SharedRunStatus(str(reply[2])) if len(reply) > 2 and int(reply[0]) == 0 else None
        return RunRecovery(RunRecoveryOutcome(int(reply[0])), int(reply[1]), status)
