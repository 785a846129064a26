"""What a DagEngine is configured with: its settings and the collaborators plugged into it.

Owns `EngineSettings` (leases, claim batching, idle pacing, store retry, size limits), the
protocols of the retry decider, the result codec (with the inline default) and the assistance
hook, and the hook signatures execution control plugs in (park, read human input, settle
control). Must not hold behaviour of the worker loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runtime_core.dag._records import ExecutionMeta, StepClaim
from runtime_core.hot_state import DEFAULT_STORE_RETRY, StoreRetryPolicy
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import DEFAULT_MAX_INPUT_BYTES, DEFAULT_MAX_RESULT_BYTES
from runtime_core.steps import StepParked

# Control statuses at which `run` returns instead of waiting: someone must act first.
PARKED_CONTROL_STATUSES = ("Paused", "WaitingForInput")
# What `run` returns when the execution was taken over by another local run (its `owner`
# lost it to recovery): this engine copy must stop advancing it.
SUPERSEDED_STATUS = "Superseded"


class RetryDecider(Protocol):
    def validate(self, step_config: dict[str, Any]) -> Any: ...

    def decide(self, config: dict[str, Any], failure_code: str, retry_count: int, seed: str) -> Any: ...


class ResultCodec(Protocol):
    """How results travel between executors and Redis (payload externalization hooks in here)."""

    async def encode(
        self,
        execution_id: str,
        step_name: str,
        result: Any,
        snapshot: ExecutionContextSnapshot | None,
        *,
        text: str | None = None,
    ) -> Any:
        """What Redis stores of `result`; `text`: its canonical JSON when the caller has it
        already (the engine checked the result with it), so it need not be encoded again."""
        ...

    async def decode(
        self, execution_id: str, stored: dict[str, Any], snapshot: ExecutionContextSnapshot | None
    ) -> dict[str, Any]: ...


class InlineResults:
    """Default codec: results are stored in Redis as they are."""

    async def encode(
        self,
        execution_id: str,
        step_name: str,
        result: Any,
        snapshot: ExecutionContextSnapshot | None,
        *,
        text: str | None = None,
    ) -> Any:
        return result

    async def decode(
        self, execution_id: str, stored: dict[str, Any], snapshot: ExecutionContextSnapshot | None
    ) -> dict[str, Any]:
        return stored


@dataclass(frozen=True)
class EngineSettings:
    lease_ms: int = 60_000
    # Most steps one worker claims (and later reports) per round trip; the claim size adapts
    # to how fast steps execute (`ClaimSizer`). 1 claims and completes one step per call.
    claim_batch_size: int = 32
    idle_poll_min_ms: int = 2
    idle_poll_max_ms: int = 100
    # While another worker of this process executes a step of the execution, an idle worker
    # is woken by that worker's completion; it only re-checks Redis this rarely.
    idle_wait_while_executing_ms: int = 1_000
    store_retry: StoreRetryPolicy = DEFAULT_STORE_RETRY
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES


class AssistanceHook(Protocol):
    """Told when an execution's ready steps come to outnumber the workers advancing it here
    (`runtime_core.assistance` asks idle runtime instances elsewhere to assist it, until told
    it is settled). Called on the worker's path: it must return quickly and never raise."""

    async def wants_help(self, meta: ExecutionMeta, backlog: int, workers: int) -> None:
        """`backlog` steps wait in the ready set; `workers` advance it here. Backlog 0: asked
        at creation (its pipeline is wider than its workers); called again, without a settle
        in between, once that backlog appeared."""
        ...

    async def settled(self, meta: ExecutionMeta) -> None:
        """No more help wanted: the ready set emptied, or the workers here stopped."""
        ...


ParkHandler = Callable[[StepClaim, StepParked, ExecutionContextSnapshot | None], Awaitable[None]]
InputReader = Callable[[str, str], Awaitable[dict[str, Any] | None]]
# (execution id, observed control status) -> the status it settled into, or None.
ControlSettler = Callable[[str, str], Awaitable[str | None]]
