"""StepInvoker: running one claimed step's executor, the engine's call into user code.

Owns resolving the step's inputs (bindings over the run state and upstream results),
building its `StepInvocation` (with the claim's operations journal and `ClaimHandle`), calling the executor
with its `timeoutMs` (an executor's exception becomes a StepFailure, never a worker crash),
re-running a parked step with its stored human input, keeping the step's lease renewed
while it runs, and refusing a result that is not strict JSON or too large. Must not make
step transitions: the engine does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from runtime_core.dag._claimed import ClaimHandle
from runtime_core.dag._engine_settings import EngineSettings, InlineResults, InputReader, ResultCodec
from runtime_core.dag._operations import ClaimOperations, OperationEvent
from runtime_core.dag._records import StepClaim
from runtime_core.dag._store import DagStore
from runtime_core.dag._worker_state import ExecutionRun
from runtime_core.errors import RuntimeCoreError
from runtime_core.pipeline import BindingError, StepDefinition, check_size, encoded_strict, resolve_inputs
from runtime_core.steps import ExecutorRegistry, StepExecutor, StepFailure, StepInvocation, StepParked

log = logging.getLogger("runtime_core.dag")


class StepInvoker:
    def __init__(
        self, store: DagStore, executors: ExecutorRegistry, results: ResultCodec, settings: EngineSettings
    ) -> None:
        self.store = store
        self.executors = executors
        self.results = results  # sets `inline_results` too
        self.settings = settings
        # Execution control's reader of stored human input (`attach_execution_control` sets it).
        self.read_human_input: InputReader | None = None
        self._lease_watch = _LeaseWatch(self)

    @property
    def results(self) -> ResultCodec:
        return self._results

    @results.setter
    def results(self, codec: ResultCodec) -> None:
        self._results = codec
        # The default codec stores results as they are: a step's encoding and its upstream
        # results' decoding are then skipped (two coroutines per step).
        self.inline_results = type(codec) is InlineResults

    def lease_kept(self, claim: StepClaim) -> _LeaseKept:
        """Renew the step's lease every third of it from now until `leave()` (its executor
        ended)."""
        return _LeaseKept(self._lease_watch, claim)

    async def keep_lease(self, claim: StepClaim) -> None:
        """Renew now, then every third of the lease, until cancelled or the claim is lost."""
        lease_ms = self.settings.lease_ms
        while True:
            try:
                if not await self.store.renew_step_lease(claim, lease_ms=lease_ms):
                    return  # the claim was lost (recovered): the completion will be rejected
            except Exception as exc:  # Redis down or still loading: the step itself must not fail
                log.warning(
                    "step.lease_renewal_failed",
                    extra={"execution_id": claim.execution_id, "step": claim.step_name, "error": repr(exc)},
                )
            await asyncio.sleep(lease_ms / 3000)  # a renewal timer, not synchronisation

    def check_result(self, step: StepDefinition, result: Any) -> str:
        """The result's canonical JSON (what Redis stores); a result that is not strict JSON or
        above `max_result_bytes` fails the step for good."""
        what = f"Result of step '{step.name}'"
        try:
            text, encoded = encoded_strict(result, what, sort_keys=True)
            check_size(len(encoded), self.settings.max_result_bytes, what)
        except RuntimeCoreError as exc:
            raise StepFailure(f"[{exc.code}] {exc.message}", code="permanent") from exc
        return text

    async def invoke(
        self, run: ExecutionRun, step: StepDefinition, claim: StepClaim, emit: OperationEvent
    ) -> Any:
        """The executor's result; `emit` sends the step's operation events (see `ClaimOperations`)."""
        executor = self.executors.get(step.step_key)
        if executor is None:
            raise StepFailure(f"No executor registered for stepKey '{step.step_key}'.", code="permanent")
        try:
            upstream = claim.dependency_results
            if not self.inline_results:
                upstream = await self._results.decode(run.execution_id, upstream, run.snapshot)
            inputs = resolve_inputs(step, run.meta.state, upstream)
        except BindingError as exc:
            raise StepFailure(exc.message, code="resolver") from exc
        # Built from the engine's own validated data: no validation pass per step.
        invocation = StepInvocation.trusted(
            {
                **run.invocation_fields,
                "step_name": step.name,
                "step_key": step.step_key,
                "config": step.config,
                "inputs": inputs,
                "attempt": claim.retry_count,
                "operations": ClaimOperations(self.store, claim, emit),
                "claim": ClaimHandle(self.store, claim, emit),
                "human_input": None,
            }
        )
        try:
            return await self._call(run, executor, invocation)
        except StepParked:
            # Stored human input is read only for a step that asks for it: no extra round
            # trip on the common path. With input present the step runs again with it.
            human_input = await self._stored_input(run, step)
            if human_input is None:
                raise
            return await self._call(run, executor, invocation.model_copy(update={"human_input": human_input}))

    async def _stored_input(self, run: ExecutionRun, step: StepDefinition) -> dict[str, Any] | None:
        if self.read_human_input is None:
            return None
        return await self.read_human_input(run.execution_id, step.name)

    async def _call(self, run: ExecutionRun, executor: StepExecutor, invocation: StepInvocation) -> Any:
        timeout_ms = invocation.config.get("timeoutMs")
        try:
            if timeout_ms:
                return await asyncio.wait_for(executor.execute(invocation), timeout=float(timeout_ms) / 1000)
            return await executor.execute(invocation)
        except TimeoutError as exc:
            raise StepFailure(
                f"Step '{invocation.step_name}' exceeded timeoutMs={timeout_ms}.", code="timeout"
            ) from exc
        except (StepFailure, StepParked):
            raise
        except Exception as exc:  # an executor bug is a step failure, never a worker crash
            log.exception(
                "step.executor_error", extra={"execution_id": run.execution_id, "step": invocation.step_name}
            )
            raise StepFailure(f"{type(exc).__name__}: {exc}", code="exception") from exc


class _LeaseWatch:
    """When the steps still running a third of their lease after they started get their lease
    renewed: the steps started within one window (a thirtieth of the lease) share one timer,
    which starts a renewal task for each of them still running when it fires. Most steps end
    long before: a step costs a set entry, no timer and no task."""

    def __init__(self, invoker: StepInvoker) -> None:
        self.invoker = invoker
        self._window: set[_LeaseKept] = set()
        self._window_ends = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self, kept: _LeaseKept) -> set[_LeaseKept]:
        """The window `kept` is in (it leaves it when its step ends)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now >= self._window_ends or loop is not self._loop:
            lease_s = self.invoker.settings.lease_ms / 1000
            self._window, self._loop = set(), loop
            self._window_ends = now + lease_s / 30
            loop.call_at(self._window_ends + lease_s / 3, self._renewing, self._window)
        self._window.add(kept)
        return self._window

    @staticmethod
    def _renewing(window: set[_LeaseKept]) -> None:
        for kept in window:
            kept.renewing()
        window.clear()


class _LeaseKept:
    """A step whose executor is still running after a third of its lease gets its lease
    renewed from then on (see `_LeaseWatch`), until `leave()`. Not a context manager: entering
    and leaving an `async with` costs two coroutines per step, and nearly every step ends with
    nothing to await."""

    __slots__ = ("_claim", "_keeper", "_watch", "_window")

    def __init__(self, watch: _LeaseWatch, claim: StepClaim) -> None:
        self._watch = watch
        self._claim = claim
        self._keeper: asyncio.Task[None] | None = None
        self._window = watch.watch(self)

    def renewing(self) -> None:
        self._keeper = asyncio.ensure_future(self._watch.invoker.keep_lease(self._claim))

    def leave(self) -> bool:
        """The executor ended: no renewal from now on. True when a renewal task had started:
        await `renewal_stopped()` then."""
        self._window.discard(self)
        if self._keeper is None:
            return False
        self._keeper.cancel()
        return True

    async def renewal_stopped(self) -> None:
        if self._keeper is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
