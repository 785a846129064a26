"""Cancelling an agent's child run with the agent's own run (the parent-close policy: cancel).

Owns asking for a child run's cancellation through what the process can reach: a control
plane's `cancel` (every state of a run: queued, being dispatched, queued in its instance,
running) or, in a process without one, the shared queue (a child not dispatched yet) and
execution control (a child that started; its owning instance observes the cancel in Redis).
Each answers whether the request is settled or must be made again later (the child is being
dispatched, or waits in its instance's queue with no execution yet). Only a cancelled parent
run asks: a process stopping leaves its children alone (the recovered call finds its child
again). Must not wait for the child's end nor decide what it means to the agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from runtime_core.errors import ConflictError, NotFoundError, RunBusyError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import ExecutionCanceller, RunExecutionIndex
from runtime_core.queueing import QueueOutcome, SharedRuntimeController

CancelRun = Callable[..., Awaitable[Any]]
"""A control plane's `cancel(any_id, caller, *, reason)`."""


class ChildCanceller(Protocol):
    async def cancel_child(self, shared_run_id: str, caller: ExecutionContextSnapshot, reason: str) -> bool:
        """Ask for the child's cancellation; False when it must be asked again later."""
        ...


class PlaneChildCanceller:
    """Through a control plane's `cancel`, which reaches the child in every state."""

    def __init__(self, cancel: CancelRun) -> None:
        self._cancel = cancel

    async def cancel_child(self, shared_run_id: str, caller: ExecutionContextSnapshot, reason: str) -> bool:
        try:
            await self._cancel(shared_run_id, caller, reason=reason)
        except RunBusyError:
            return False
        except (NotFoundError, ConflictError):  # gone or finished: nothing left to cancel
            return True
        return True


class HotStateChildCanceller:
    """Through the shared queue and execution control: what a process without a control plane
    (a runtime-instance process) reaches in Redis."""

    def __init__(
        self, submitter: SharedRuntimeController, index: RunExecutionIndex, control: ExecutionCanceller
    ) -> None:
        self.submitter = submitter
        self.index = index
        self.control = control

    async def cancel_child(self, shared_run_id: str, caller: ExecutionContextSnapshot, reason: str) -> bool:
        transition = await self.submitter.queue.cancel(
            shared_run_id, reason=reason, requested_by=caller.user_id
        )
        if transition.outcome is QueueOutcome.BUSY:
            return False
        if transition.applied:
            record = await self.submitter.runs.get(shared_run_id)
            if record is not None:
                await self.submitter.journal.record(
                    record, "cancelled", reason=reason, requested_by=caller.user_id
                )
            return True
        local = await self.index.get_by_shared(shared_run_id)
        if local is None or local.status.is_terminal:
            return True  # ended before it was dispatched, or after it ran
        if local.execution_id is None:
            return False  # waiting in its instance's queue: cancelled once it has an execution
        try:
            await self.control.cancel(local.execution_id, caller, reason=reason)
        except (NotFoundError, ConflictError):  # it finished (or left Redis) meanwhile
            return True
        return True
