"""The wire contract shared by the HTTP and gRPC providers and the process's command endpoints.

Owns the command names, which pydantic request model each command carries as JSON, and
the runtime error envelope `{code, message, hint}` that turns a typed runtime error into
data on one side and back into the same error class on the other. Must not know any
transport.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from runtime_core.errors import (
    ConflictError,
    InputTooLargeError,
    InvalidPipelineError,
    MissingSnapshotError,
    NotFoundError,
    RuntimeCoreError,
    StoreUnavailableError,
)
from runtime_core.providers._protocol import (
    CancelRunRequest,
    DispatchRequest,
    ProviderError,
    QueueControlRequest,
    RunRef,
)

INVALID_REQUEST_CODE = "invalid_request"


class InstanceRef(BaseModel):
    runtime_instance_id: str


class Command(StrEnum):
    DISPATCH = "dispatch"
    RUN_STATUS = "run_status"
    CANCEL_RUN = "cancel_run"
    PAUSE_QUEUE = "pause_queue"
    RESUME_QUEUE = "resume_queue"
    CAPACITY = "capacity"

    @property
    def request_model(self) -> type[BaseModel]:
        return _REQUESTS[self]


_REQUESTS: dict[Command, type[BaseModel]] = {
    Command.DISPATCH: DispatchRequest,
    Command.RUN_STATUS: RunRef,
    Command.CANCEL_RUN: CancelRunRequest,
    Command.PAUSE_QUEUE: QueueControlRequest,
    Command.RESUME_QUEUE: QueueControlRequest,
    Command.CAPACITY: InstanceRef,
}

_ERROR_CLASSES: dict[str, type[RuntimeCoreError]] = {
    cls.code: cls
    for cls in (
        NotFoundError,
        ConflictError,
        StoreUnavailableError,
        MissingSnapshotError,
        InputTooLargeError,
        ProviderError,
    )
}


class WireError(BaseModel):
    """A runtime error as data; `rule` only for invalid pipelines."""

    code: str
    message: str
    hint: str | None = None
    rule: str | None = None

    @classmethod
    def of(cls, exc: RuntimeCoreError) -> WireError:
        return cls(code=exc.code, message=exc.message, hint=exc.hint, rule=getattr(exc, "rule", None))

    def to_exception(self) -> RuntimeCoreError:
        """The same typed error class the runtime raised (the base class for unknown codes)."""
        if self.code == InvalidPipelineError.code:
            return InvalidPipelineError(self.rule or "", self.message, hint=self.hint)
        error_class = _ERROR_CLASSES.get(self.code)
        if error_class is not None:
            return error_class(self.message, hint=self.hint)
        error = RuntimeCoreError(self.message, hint=self.hint)
        error.code = self.code
        return error
