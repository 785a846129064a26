"""ControlStore: the typed wrapper over `lua/control_cas.lua` plus control-state reads.

The only place that knows the script's KEYS/ARGV order; maps its return codes to
`CasOutcome`. Must not decide anything about tenants or raise caller-facing errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from runtime_core.control._models import ControlState
from runtime_core.dag import DagStore, ExecutionMeta

ANY_VERSION = -1
"""`expected_version` of an action judged against the current state, whatever its version."""


class CasOutcome(Enum):
    APPLIED = 1
    UNCHANGED = 2
    EXECUTION_MISSING = -1
    EXECUTION_TERMINAL = -2
    VERSION_MISMATCH = -3
    TRANSITION_NOT_ALLOWED = -4
    WAITING_KEY_MISMATCH = -5
    NOT_DRAINED = -6
    UNKNOWN_ACTION = -7


@dataclass(frozen=True)
class CasResult:
    outcome: CasOutcome
    now_ms: int
    state: ControlState | None = None
    execution_status: str | None = None


class ControlStore:
    """Reads the control hash and applies actions through `control_cas` only."""

    def __init__(self, dag_store: DagStore) -> None:
        self.dag_store = dag_store
        self._redis = dag_store.hot_state.redis
        self._script = dag_store.hot_state.coalesced("control_cas")

    async def load_meta(self, execution_id: str) -> ExecutionMeta | None:
        return await self.dag_store.load_meta(execution_id)

    async def read(self, execution_id: str) -> ControlState:
        fields = await self._redis.hgetall(self.dag_store.keys(execution_id).control)
        return ControlState.from_fields(execution_id, fields)

    async def apply(
        self,
        execution_id: str,
        action: str,
        *,
        expected_version: int,
        waiting_key: str = "",
        waiting_step: str = "",
        reason: str = "",
        payload: dict[str, Any] | None = None,
    ) -> CasResult:
        k = self.dag_store.keys(execution_id)
        reply = await self._script(
            keys=[k.control, k.meta, k.running, k.human_input],
            args=[
                expected_version,
                action,
                waiting_key,
                waiting_step,
                reason,
                json.dumps(payload or {}, sort_keys=True, separators=(",", ":")),
            ],
        )
        outcome, now = CasOutcome(int(reply[0])), int(reply[1])
        if outcome is CasOutcome.EXECUTION_TERMINAL:
            return CasResult(outcome, now, execution_status=str(reply[2]))
        if outcome in (CasOutcome.EXECUTION_MISSING, CasOutcome.UNKNOWN_ACTION):
            return CasResult(outcome, now)
        fields = dict(zip(reply[2::2], reply[3::2], strict=True))
        return CasResult(outcome, now, ControlState.from_fields(execution_id, fields))

    async def read_input(self, execution_id: str, step_name: str) -> dict[str, Any] | None:
        key = self.dag_store.keys(execution_id).human_input
        # Coalesced: the runs of a batch reach their human steps together.
        (raw,) = await self.dag_store.hot_state.coalescer.commands(lambda pipe: pipe.hget(key, step_name))
        return None if raw is None else dict(json.loads(raw))
