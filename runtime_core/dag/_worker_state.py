"""What one process keeps about an execution it advances, shared by its local workers.

Owns the execution's cached definition, gates and claim sizer, the idle workers waiting for a
local change (`IdleWorkers`), the stop / park state, how many workers hold claims, how many
workers advance it here and whether they asked for assistance, the pace of an idle worker's
next round, and `Completion` (a step that ran, to report with the next claim). Must not touch
Redis.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from runtime_core.dag._batching import ClaimSizer
from runtime_core.dag._gating import StepGates
from runtime_core.dag._records import AdvanceResult, ExecutionMeta, StepClaim
from runtime_core.dag._worker_permits import Permit
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import StepDefinition


class IdleWorkers:
    """This process's idle workers of one execution, woken by its local changes.

    `wake(n)` wakes at most n of them (a completion that made one step Ready needs no
    other worker: the completing worker claims it next), `wake()` wakes all. A worker that
    found nothing to claim is not waiting yet while it finalizes or looks for stale claims:
    a wake then would be lost, and the worker would sleep a poll interval while steps wait.
    So a worker reads `generation` before it claims and waits only if no wake came since.
    """

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self.generation = 0  # wakes so far

    def wake(self, count: int | None = None) -> None:
        if count == 0:
            return
        self.generation += 1
        woken = 0
        while self._waiting and (count is None or woken < count):
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                woken += 1

    async def wait(self, timeout_s: float, *, since: int | None = None) -> bool:
        """True when woken (at once when a wake came after `since`, a `generation` read
        earlier), False when `timeout_s` passed."""
        if since is not None and since != self.generation:
            return True
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout=timeout_s)
        except TimeoutError:
            return False
        finally:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
        return True


@dataclass
class ExecutionRun:
    """What one process caches about an execution it advances, plus its workers' shared state."""

    meta: ExecutionMeta
    steps: dict[str, StepDefinition]
    gates: StepGates
    sizer: ClaimSizer
    idle: IdleWorkers = field(default_factory=IdleWorkers)
    holding: int = 0  # this process's workers holding claims (executing or reporting them)
    workers: int = 1  # this process's workers advancing it
    # More ready steps than this asks for assistance (None: never, e.g. a pipeline that caps
    # its own parallelism); `help_wanted` once asked; `help_expected` while it asked at
    # creation (its pipeline is wider than its workers) and no backlog was reported yet.
    help_threshold: int | None = None
    help_wanted: bool = False
    help_expected: bool = False
    # The claims its creation made for these workers (`DagEngine.create_execution`'s
    # `claim_first`) and the worker permit acquired for them: the first worker's first round
    # holds that permit and its first claim takes them instead of calling Redis.
    first_claims: AdvanceResult | None = None
    first_permit: Permit | None = None
    # Steps known Completed (at load, then by this process's completions): at most the
    # real count, which other processes' completions raise too.
    completed: int = 0
    final_status: str | None = None
    parked_status: str | None = None
    stopped: bool = False
    settling: bool = False

    @property
    def execution_id(self) -> str:
        return self.meta.execution_id

    @property
    def snapshot(self) -> ExecutionContextSnapshot | None:
        return self.meta.snapshot

    @functools.cached_property
    def invocation_fields(self) -> dict[str, Any]:
        """The fields every step's `StepInvocation` takes from the execution (copied into each)."""
        meta = self.meta
        return {
            "execution_id": meta.execution_id,
            "pipeline_name": meta.pipeline.name,
            "pipeline_version": meta.pipeline.version,
            "state": meta.state,
            "snapshot": meta.snapshot,
        }

    @property
    def advancing(self) -> bool:
        return not self.stopped and self.final_status is None and self.parked_status is None

    def completes_all(self, completing: int) -> bool:
        """Completing `completing` more steps would complete every step (as far as known
        here: a call this says no to may still converge the execution)."""
        return self.completed + completing >= len(self.steps)

    def stop(self, *, final_status: str | None = None, parked_status: str | None = None) -> None:
        self.final_status = final_status or self.final_status
        self.parked_status = parked_status or self.parked_status
        self.stopped = True
        self.idle.wake()


@dataclass(frozen=True)
class WorkerPace:
    """How a worker paces its next idle round: the poll delay, and whether its last wait
    ended because a local completion woke it (rather than by timing out)."""

    idle_ms: int
    woken_locally: bool = False


@dataclass(frozen=True)
class Idle:
    """Nothing was claimable: the server time and when something may become claimable."""

    now_ms: int
    wake_at_ms: int | None = None


@dataclass(slots=True)
class Completion:
    """A step that ran, reported with the worker's next claim: the result to store and the
    extra attributes of its `step.completed` event (token usage). One per step, never
    changed once made (not frozen: a frozen dataclass's `__init__` costs three times more)."""

    claim: StepClaim
    stored: Any
    attributes: dict[str, Any]
