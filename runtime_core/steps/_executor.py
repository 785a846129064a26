"""The step executor contract: what a step gets, what it returns, how it fails."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.identity import ExecutionContextSnapshot


class StepInvocation(BaseModel):
    """Everything an executor may read. Inputs are already resolved from bindings.

    `operations` is the claimed step's `runtime_core.steps.operations.OperationJournal` (None
    outside the engine): steps calling peers that may act go through `guarded_call` with it.
    `claim` is the engine's `ClaimedStep` for this attempt (None outside the engine): its
    token, events and live output.
    """

    model_config = ConfigDict(frozen=True)

    execution_id: str
    pipeline_name: str
    pipeline_version: str
    step_name: str
    step_key: str
    config: dict[str, Any]
    inputs: dict[str, Any]
    state: dict[str, Any]
    attempt: int
    snapshot: ExecutionContextSnapshot | None = None
    human_input: dict[str, Any] | None = None
    operations: Any = Field(default=None, exclude=True, repr=False)
    claim: Any = Field(default=None, exclude=True, repr=False)

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> StepInvocation:
        """An invocation from the engine's own validated data, every field given (`values`
        becomes its fields' dict): what `model_construct` builds, without its walk over the
        fields (once per step)."""
        if len(values) != len(_FIELDS):
            raise TypeError(f"StepInvocation.trusted takes every field: {sorted(_FIELDS)}")
        invocation = cls.__new__(cls)
        object.__setattr__(invocation, "__dict__", values)
        object.__setattr__(invocation, "__pydantic_fields_set__", set(_FIELDS))
        object.__setattr__(invocation, "__pydantic_extra__", None)
        object.__setattr__(invocation, "__pydantic_private__", None)
        return invocation


_FIELDS = frozenset(StepInvocation.model_fields)


class StepFailure(Exception):
    """A step's own failure; `code` drives retry policies (transient, timeout, permanent, ...).

    Without retry policies, `permanent` and `not_found` are never retried and any other code
    is (`runtime_core.policy.NON_RETRYABLE_FAILURE_CODES`). `retry_after_ms` is the earliest a
    retry may start (a provider's `Retry-After`): backoff and jitter may only push it later.
    `usage` is what the failed attempt consumed (LLM tokens), recorded in the ledger.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "transient",
        retry_after_ms: int | None = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_ms = retry_after_ms
        self.usage = usage


class StepParked(Exception):
    """The step cannot finish until human input arrives; the engine parks the execution."""

    def __init__(self, waiting_key: str, prompt: str = "") -> None:
        super().__init__(f"waiting for input under key {waiting_key!r}")
        self.waiting_key = waiting_key
        self.prompt = prompt


@runtime_checkable
class StepExecutor(Protocol):
    """One executor per stepKey. Must be deterministic for the same invocation inputs."""

    step_key: str

    async def execute(self, invocation: StepInvocation) -> Any:
        """Return a JSON-serialisable result or raise StepFailure."""
        ...
