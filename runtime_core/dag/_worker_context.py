"""What the workers of one `DagEngine.run` work with, fixed when the run begins.

Owns `WorkerContext`: the engine's store, settings, collaborators and hooks as they stood
when `run` was called (a runtime instance sets `owner` and `worker_permits` on its copy of
the engine first, an assisting instance `assisting` and its '@<assistant>' claimer as `owner`),
the events its workers emit, and the retry of an idempotent store call while Redis is
unavailable. Must not decide anything about steps or claims.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from runtime_core.concurrency import ConcurrencyGate
from runtime_core.dag._engine_settings import (
    AssistanceHook,
    ControlSettler,
    EngineSettings,
    ParkHandler,
    RetryDecider,
)
from runtime_core.dag._events import EngineEvent, ExecutionObserver
from runtime_core.dag._invocation import StepInvoker
from runtime_core.dag._records import ExecutionView
from runtime_core.dag._step_tracing import StepTracing
from runtime_core.dag._store import DagStore
from runtime_core.dag._worker_permits import WorkerPermits
from runtime_core.dag._worker_state import ExecutionRun
from runtime_core.errors import StoreUnavailableError
from runtime_core.flow import StepRateLimiter
from runtime_core.hot_state import retry_while_unavailable

log = logging.getLogger("runtime_core.dag")

_T = TypeVar("_T")


@dataclass(frozen=True)
class WorkerContext:
    store: DagStore
    settings: EngineSettings
    retry: RetryDecider
    invoker: StepInvoker
    gate: ConcurrencyGate
    rate_limiter: StepRateLimiter | None
    observer: ExecutionObserver
    step_tracing: StepTracing
    on_park: ParkHandler | None
    settle_control: ControlSettler | None
    # The process's worker permits (a runtime instance sets them); None: unbounded by others.
    worker_permits: WorkerPermits | None
    # The local run the workers claim for ("" outside runtime instances, see DagEngine.owner),
    # or '@<assistant>' for the workers of an instance assisting the execution.
    owner: str
    # Told when the execution's ready steps outnumber its workers here (see DagEngine.assistance).
    assistance: AssistanceHook | None = None
    # The workers assist another instance's execution: they leave once nothing is claimable
    # instead of waiting, and never ask for assistance themselves.
    assisting: bool = False
    # An observer uses the terminal view of `execution.finalized` (see `wants_final_view`): the
    # call expected to finalize the execution reads it along.
    final_view: bool = False

    def emit(
        self,
        name: str,
        run: ExecutionRun,
        *,
        step: str | None = None,
        worker_id: str | None = None,
        at_ms: int = 0,
        view: ExecutionView | None = None,
        **attributes: Any,
    ) -> Awaitable[None]:
        """The observer's handling of the event, to await (not a coroutine of its own: two
        events per step, each one coroutine less)."""
        meta = run.meta
        return self.observer.on_event(
            EngineEvent(
                name, meta.execution_id, meta.snapshot, step, worker_id, at_ms, attributes, meta, view
            )
        )

    async def until_available(
        self, operation: Callable[[], Awaitable[_T]], what: str, execution_id: str, **context: Any
    ) -> _T:
        """Retry one idempotent store call while Redis is unavailable (capped backoff, logged).

        The first attempt is made here: it is the one that answers nearly always (a call or
        more per step), and it needs no retry loop set up around it."""
        try:
            return await operation()
        except StoreUnavailableError as exc:
            failed = exc
        return await retry_while_unavailable(
            operation,
            what,
            self.settings.store_retry,
            failed=failed,
            logger=log,
            execution_id=execution_id,
            **context,
        )
