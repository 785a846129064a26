"""AssistanceLeases: typed wrappers over the assistance scripts of one execution.

Owns calling `assist_join` (join or renew a seat: the lease an assistant's claims are checked
against) and `assist_leave`, mapping their return codes to `SeatOutcome`. The only place that
knows those scripts' KEYS/ARGV order. Must not decide whom to assist.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from runtime_core.dag import DagStore


class SeatOutcome(Enum):
    SEATED = 1  # joined or renewed
    LEFT = 0  # leave: done (or there was no record of it)
    EXECUTION_MISSING = -1
    NOT_RUNNING = -2
    NOTHING_READY = -3  # join: no step waits in the ready set
    OWN_EXECUTION = -4  # join: the execution runs on the joining instance itself
    NOT_SEATED = -5  # renew: it left, or its lease lapsed


@dataclass(frozen=True)
class Seat:
    outcome: SeatOutcome
    now_ms: int
    lease_until_ms: int = 0
    detail: str = ""


class AssistanceLeases:
    def __init__(self, dag_store: DagStore) -> None:
        self.dag_store = dag_store
        self._scripts = dag_store.hot_state.scripts

    async def join(
        self,
        execution_id: str,
        assistant: str,
        *,
        runtime_instance_id: str,
        incarnation: str,
        workers: int,
        lease_ms: int,
    ) -> Seat:
        return await self._seat(
            execution_id, assistant, "join", lease_ms, runtime_instance_id, incarnation, workers
        )

    async def renew(self, execution_id: str, assistant: str, *, lease_ms: int) -> Seat:
        return await self._seat(execution_id, assistant, "renew", lease_ms, "", "", 0)

    async def _seat(
        self,
        execution_id: str,
        assistant: str,
        mode: str,
        lease_ms: int,
        runtime_instance_id: str,
        incarnation: str,
        workers: int,
    ) -> Seat:
        k = self.dag_store.keys(execution_id)
        reply = await self._scripts["assist_join"](
            keys=[k.meta, k.assistants, k.ready],
            args=[assistant, lease_ms, mode, runtime_instance_id, incarnation, workers],
        )
        code, now = int(reply[0]), int(reply[1])
        if code == 1:
            return Seat(SeatOutcome.SEATED, now, int(reply[2]))
        return Seat(SeatOutcome(code), now, detail=str(reply[2]) if len(reply) > 2 else "")

    async def leave(self, execution_id: str, assistant: str, *, steps_completed: int, reason: str) -> Seat:
        k = self.dag_store.keys(execution_id)
        reply = await self._scripts["assist_leave"](
            keys=[k.meta, k.assistants], args=[assistant, steps_completed, reason]
        )
        code = int(reply[0])
        return Seat(SeatOutcome.LEFT if code in (0, 1) else SeatOutcome(code), int(reply[1]))
