"""The gRPC runtime provider: commands to a runtime-instance process's `grpc.aio` service.

Owns the RPC of each command (`GRPC_METHODS`, the service in `proto/runtime_provider.proto`),
one `grpc.aio` channel per endpoint with a deadline per call and the W3C trace context in
the call metadata, runtime errors re-raised as
their own class from the reply's `error` field, and every gRPC status failure
(UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, ...) raised as `ProviderError`. Must not retry
a dispatch.
"""

from __future__ import annotations

import asyncio

import grpc
from pydantic import BaseModel

from runtime_core.instances import HostTransport, InstanceRegistry, RuntimeHostManager
from runtime_core.observability import inject_context
from runtime_core.providers._protocol import ProviderError
from runtime_core.providers._remote import DEFAULT_TIMEOUT_S, RemoteRuntimeProvider
from runtime_core.providers._wire import Command, WireError
from runtime_core.providers.grpc_gen import runtime_provider_pb2 as pb
from runtime_core.providers.grpc_gen import runtime_provider_pb2_grpc as pb_grpc

GRPC_PROVIDER_NAME = HostTransport.GRPC.value

GRPC_METHODS: dict[Command, str] = {
    Command.DISPATCH: "Dispatch",
    Command.RUN_STATUS: "RunStatus",
    Command.CANCEL_RUN: "CancelRun",
    Command.PAUSE_QUEUE: "PauseQueue",
    Command.RESUME_QUEUE: "ResumeQueue",
    Command.CAPACITY: "Capacity",
}


class GrpcRuntimeProvider(RemoteRuntimeProvider):
    """`provider.name = grpc`; channels are opened per endpoint and reused."""

    transport = HostTransport.GRPC

    def __init__(
        self,
        registry: InstanceRegistry,
        *,
        hosts: RuntimeHostManager | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        super().__init__(registry, hosts=hosts, timeout_s=timeout_s)
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, endpoint: str) -> pb_grpc.RuntimeProviderStub:
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = grpc.aio.insecure_channel(endpoint)
        return pb_grpc.RuntimeProviderStub(channel)

    async def _send(self, endpoint: str, command: Command, request: BaseModel) -> str:
        rpc = getattr(self._stub(endpoint), GRPC_METHODS[command])
        carrier: dict[str, str] = {}
        inject_context(carrier)  # W3C traceparent of the current (dispatch) span, when tracing
        try:
            reply = await rpc(
                pb.CommandRequest(json=request.model_dump_json()),
                timeout=self.timeout_s,
                metadata=tuple(carrier.items()) or None,
            )
        except grpc.aio.AioRpcError as exc:
            raise ProviderError(
                f"gRPC {GRPC_METHODS[command]} to {endpoint} failed: {exc.code().name}: {exc.details()}",
                hint="The runtime-instance process is unreachable; the run was not delivered.",
            ) from exc
        if reply.WhichOneof("outcome") == "error":
            e = reply.error
            raise WireError(
                code=e.code, message=e.message, hint=e.hint or None, rule=e.rule or None
            ).to_exception()
        return reply.json

    async def aclose(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(channel.close() for channel in channels))
