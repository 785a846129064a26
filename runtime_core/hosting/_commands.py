"""Runtime commands: what a process's HTTP and gRPC endpoints execute against its child instances.

Owns validating a wire command's payload into its pydantic request, delivering it through
the LOCAL provider over this process's instance pool (so a remote dispatch lands in the
target instance's local queue exactly like an in-process one), turning a runtime error or
an invalid payload into the wire error envelope, and the span of a received command (named
and fed its trace carrier by the endpoint). Must not know the transport.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from runtime_core.errors import RuntimeCoreError
from runtime_core.instances import LocalInstancePool
from runtime_core.observability import command_span
from runtime_core.providers import (
    INVALID_REQUEST_CODE,
    CancelRunRequest,
    Command,
    DispatchRequest,
    InstanceRef,
    LocalRuntimeProvider,
    QueueControlRequest,
    RunRef,
    WireError,
)


def invalid_request(message: str) -> WireError:
    return WireError(
        code=INVALID_REQUEST_CODE,
        message=message,
        hint="Send the provider's pydantic request model as a JSON object.",
    )


def parse_json_object(text: str | bytes) -> dict[str, Any] | WireError:
    """A JSON object body, or the invalid-request error (empty text is an empty object)."""
    if not text:
        return {}
    try:
        payload = json.loads(text)
    except ValueError as exc:
        return invalid_request(f"The command body is not JSON: {exc}.")
    if not isinstance(payload, dict):
        return invalid_request("The command body must be a JSON object.")
    return payload


class RuntimeCommands:
    def __init__(self, pool: LocalInstancePool) -> None:
        self.pool = pool
        self._local = LocalRuntimeProvider(pool)

    async def execute_traced(
        self,
        command: Command,
        payload: dict[str, Any],
        *,
        span_name: str,
        carrier: Mapping[str, str] | Iterable[tuple[str, str]],
        attributes: Mapping[str, Any] | None = None,
    ) -> BaseModel | WireError:
        """`execute` inside a SERVER span continuing the sender's trace context (when tracing)."""
        span_attributes = {
            "mcprt.command": command.value,
            "mcprt.runtime_instance.id": str(payload.get("runtime_instance_id", "")),
            **(attributes or {}),
        }
        with command_span(span_name, carrier, span_attributes) as span:
            result = await self.execute(command, payload)
            if span is not None and isinstance(result, WireError):
                span.set_attribute("error.type", result.code)
            return result

    async def execute(self, command: Command, payload: dict[str, Any]) -> BaseModel | WireError:
        """The response model, or the runtime / validation error as a wire error."""
        try:
            request = command.request_model.model_validate(payload)
            return await self._deliver(command, request)
        except ValidationError as exc:
            return invalid_request(f"Invalid {command.value} request: {exc}")
        except RuntimeCoreError as exc:
            return WireError.of(exc)

    async def _deliver(self, command: Command, request: BaseModel) -> BaseModel:
        local = self._local
        match command, request:
            case Command.DISPATCH, DispatchRequest():
                return await local.dispatch(request)
            case Command.RUN_STATUS, RunRef():
                return await local.run_status(request)
            case Command.CANCEL_RUN, CancelRunRequest():
                return await local.cancel_run(request)
            case Command.PAUSE_QUEUE, QueueControlRequest():
                return await local.pause_queue(request)
            case Command.RESUME_QUEUE, QueueControlRequest():
                return await local.resume_queue(request)
            case Command.CAPACITY, InstanceRef():
                return await local.capacity(request.runtime_instance_id)
        raise AssertionError(f"unmapped command {command}")
