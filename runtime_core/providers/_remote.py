"""What the HTTP and gRPC providers share: endpoint lookup, typed commands, process scale-out.

Owns `RemoteRuntimeProvider`: per call it reads the target's `transport.endpoint` from its
registry record (so one provider object reaches every process of its transport), sends
one wire command through the transport subclass, decodes the typed response, and turns a
missing or foreign registry record into `ProviderError`. A dispatch that got no answer
(`ProviderError`) makes the instance unreachable from this process for a back-off
(`reaches`, see `_backoff`), so admission offers its runs to other instances meanwhile. Its
scale-out is the provider-specific provisioner: it asks the runtime host manager for a
process of its transport. Must not execute steps, mutate DAG state, or retry a failed dispatch.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TypeVar

from pydantic import BaseModel

from runtime_core.errors import NotFoundError
from runtime_core.instances import (
    CapacityDescriptor,
    HostTransport,
    InstanceRegistry,
    LocalRunView,
    QueueStateView,
    RuntimeHostManager,
)
from runtime_core.providers._backoff import UnansweredDispatches
from runtime_core.providers._protocol import (
    CancelRunRequest,
    DispatchRequest,
    DispatchResponse,
    ProviderError,
    ProviderMetadata,
    QueueControlRequest,
    RunRef,
    ScaleOutProvisionRequest,
    ScaleOutProvisionResult,
)
from runtime_core.providers._wire import Command, InstanceRef

log = logging.getLogger("runtime_core.providers")

DEFAULT_TIMEOUT_S = 10.0

_Response = TypeVar("_Response", bound=BaseModel)


class RemoteRuntimeProvider(ABC):
    """`provider.name = transport.name = <transport>`; the endpoint comes from the registry."""

    transport: HostTransport

    def __init__(
        self,
        registry: InstanceRegistry,
        *,
        hosts: RuntimeHostManager | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.registry = registry
        self.hosts = hosts
        self.timeout_s = timeout_s
        self.unanswered = UnansweredDispatches()
        self.metadata = ProviderMetadata(
            provider_name=self.transport.value, transport_name=self.transport.value
        )

    @abstractmethod
    async def _send(self, endpoint: str, command: Command, request: BaseModel) -> str:
        """Deliver one command; return the response JSON or raise the typed / provider error."""

    @abstractmethod
    async def aclose(self) -> None: ...

    async def endpoint(self, runtime_instance_id: str) -> str:
        try:
            descriptor = await self.registry.descriptor(runtime_instance_id)
        except NotFoundError as exc:
            raise ProviderError(exc.message, hint=exc.hint) from exc
        name = self.metadata.provider_name
        if descriptor.provider_name != name or not descriptor.provider_endpoint:
            raise ProviderError(
                f"Runtime instance '{runtime_instance_id}' is reached through provider "
                f"'{descriptor.provider_name}', not '{name}'.",
                hint="Select the provider named in the instance's registry metadata.",
            )
        return descriptor.provider_endpoint

    async def _call(
        self, command: Command, runtime_instance_id: str, request: BaseModel, response: type[_Response]
    ) -> _Response:
        endpoint = await self.endpoint(runtime_instance_id)
        return response.model_validate_json(await self._send(endpoint, command, request))

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        rid = request.runtime_instance_id
        try:
            response = await self._call(Command.DISPATCH, rid, request, DispatchResponse)
        except ProviderError as exc:
            backoff_s = self.unanswered.unanswered(rid)
            log.warning(
                "provider.instance_unanswered runtime_instance_id=%s backoff_ms=%d",
                rid,
                backoff_s * 1000,
                extra={"runtime_instance_id": rid, "backoff_ms": int(backoff_s * 1000), "error": exc.message},
            )
            raise
        except Exception:  # a runtime error is an answer: the instance is reachable
            self.unanswered.answered(rid)
            raise
        self.unanswered.answered(rid)
        return response

    def reaches(self, runtime_instance_id: str) -> bool:
        """Whether to offer the instance runs now (not while backing off from an unanswered dispatch)."""
        return self.unanswered.reaches(runtime_instance_id)

    async def run_status(self, ref: RunRef) -> LocalRunView:
        return await self._call(Command.RUN_STATUS, ref.runtime_instance_id, ref, LocalRunView)

    async def cancel_run(self, request: CancelRunRequest) -> LocalRunView:
        return await self._call(Command.CANCEL_RUN, request.runtime_instance_id, request, LocalRunView)

    async def pause_queue(self, request: QueueControlRequest) -> QueueStateView:
        return await self._call(Command.PAUSE_QUEUE, request.runtime_instance_id, request, QueueStateView)

    async def resume_queue(self, request: QueueControlRequest) -> QueueStateView:
        return await self._call(Command.RESUME_QUEUE, request.runtime_instance_id, request, QueueStateView)

    async def capacity(self, runtime_instance_id: str) -> CapacityDescriptor:
        ref = InstanceRef(runtime_instance_id=runtime_instance_id)
        return await self._call(Command.CAPACITY, runtime_instance_id, ref, CapacityDescriptor)

    async def scale_out(self, request: ScaleOutProvisionRequest) -> ScaleOutProvisionResult:
        if self.hosts is None:
            return ScaleOutProvisionResult(
                fulfilled=False,
                reason=f"no runtime host manager is configured for {self.transport.value} scale-out",
            )
        outcome = await self.hosts.scale_out(self.transport, request.tenant_settings, request.snapshot)
        return ScaleOutProvisionResult.model_validate(outcome.model_dump())
