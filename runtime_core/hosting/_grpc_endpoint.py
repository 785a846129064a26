"""The gRPC command endpoint of a runtime-instance process: the `RuntimeProvider` service (grpc.aio).

Owns the servicer (each RPC = one runtime command: JSON request in, JSON response or a
typed `RuntimeError` out, traced as a server span continuing the caller's `traceparent`
metadata), the standard gRPC health service (`grpc.health.v1.Health/Check`:
service "" answers readiness, "liveness" liveness) and the `grpc.aio` server on the
process's loopback port. Must not decide anything about runs.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from runtime_core.health import HealthService
from runtime_core.hosting._commands import RuntimeCommands, parse_json_object
from runtime_core.hosting._uvicorn import EndpointBindError
from runtime_core.providers import GRPC_METHODS, Command, WireError
from runtime_core.providers.grpc_gen import runtime_provider_pb2 as pb
from runtime_core.providers.grpc_gen import runtime_provider_pb2_grpc as pb_grpc

_STOP_GRACE_S = 1.0
_Context = grpc.aio.ServicerContext
_SERVICE = pb.DESCRIPTOR.services_by_name["RuntimeProvider"].full_name


def _text_metadata(context: _Context) -> list[tuple[str, str]]:
    """The call's text metadata (where the caller's `traceparent` travels)."""
    return [(key, value) for key, value in context.invocation_metadata() or () if isinstance(value, str)]


def _error_reply(error: WireError) -> pb.CommandReply:
    return pb.CommandReply(
        error=pb.RuntimeError(
            code=error.code, message=error.message, hint=error.hint or "", rule=error.rule or ""
        )
    )


class RuntimeProviderServicer(pb_grpc.RuntimeProviderServicer):
    def __init__(self, commands: RuntimeCommands) -> None:
        self.commands = commands

    async def _run(self, command: Command, request: pb.CommandRequest, context: _Context) -> pb.CommandReply:
        payload = parse_json_object(request.json)
        if isinstance(payload, WireError):
            return _error_reply(payload)
        method = GRPC_METHODS[command]
        result = await self.commands.execute_traced(
            command,
            payload,
            span_name=f"{_SERVICE}/{method}",
            carrier=_text_metadata(context),
            attributes={"rpc.system": "grpc", "rpc.service": _SERVICE, "rpc.method": method},
        )
        if isinstance(result, WireError):
            return _error_reply(result)
        return pb.CommandReply(json=result.model_dump_json())

    async def Dispatch(self, request: pb.CommandRequest, context: _Context) -> pb.CommandReply:
        return await self._run(Command.DISPATCH, request, context)

    async def RunStatus(self, request: pb.CommandRequest, context: _Context) -> pb.CommandReply:
        return await self._run(Command.RUN_STATUS, request, context)

    async def CancelRun(self, request: pb.CommandRequest, context: _Context) -> pb.CommandReply:
        return await self._run(Command.CANCEL_RUN, request, context)

    async def PauseQueue(self, request: pb.CommandRequest, context: _Context) -> pb.CommandReply:
        return await self._run(Command.PAUSE_QUEUE, request, context)

    async def ResumeQueue(self, request: pb.CommandRequest, context: _Context) -> pb.CommandReply:
        return await self._run(Command.RESUME_QUEUE, request, context)

    async def Capacity(self, request: pb.CommandRequest, context: _Context) -> pb.CommandReply:
        return await self._run(Command.CAPACITY, request, context)


LIVENESS_SERVICE = "liveness"
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class HealthCheckServicer(health_pb2_grpc.HealthServicer):
    """`Check`: "" (the whole server) = readiness, "liveness" = the process answers."""

    def __init__(self, health: HealthService) -> None:
        self.health = health

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        if request.service == LIVENESS_SERVICE:
            report = self.health.live()
        elif request.service == "":
            report = await self.health.ready()
        else:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown health service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=_SERVING if report.healthy else _NOT_SERVING)


class GrpcCommandEndpoint:
    def __init__(self, commands: RuntimeCommands, host: str, port: int, health: HealthService) -> None:
        self.address = f"{host}:{port}"
        self._servicer = RuntimeProviderServicer(commands)
        self._health = HealthCheckServicer(health)
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        server = grpc.aio.server()
        pb_grpc.add_RuntimeProviderServicer_to_server(self._servicer, server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        try:
            server.add_insecure_port(self.address)
        except RuntimeError as exc:  # grpc's only word for "cannot bind" (port taken, ...)
            raise EndpointBindError(
                f"Cannot listen on {self.address}: {exc}",
                hint="Pick a free port (--port) or a local address (--bind-host).",
            ) from exc
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(_STOP_GRACE_S)
            self._server = None
