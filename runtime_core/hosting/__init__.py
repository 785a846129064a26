"""Runtime-instance processes: the process side of the HTTP and gRPC providers.

Owns the process that hosts K child runtime instances (the dispatch targets, not the host)
behind a starlette/uvicorn HTTP command endpoint or a `grpc.aio` command service, its
options and argument parser (shared with `mcp-runtime runtime-instance`), discovery of the
control plane before self-registration, its `/metrics` endpoint and tracing setup, and clean
unregistration on SIGTERM / SIGINT. Also
owns the HTTP serving pieces the MCP server reuses: `UvicornEndpoint` (bind first, then
serve), the /livez /readyz /healthz routes over a `runtime_core.health.HealthService`
(gRPC processes answer the standard `grpc.health.v1.Health` service instead) and the settled
heap of a started process (`settle_started_heap`).
Starting such processes for scale-out is the host manager's job
(`runtime_core.instances.RuntimeHostManager`). Must not dispatch, admit or recover runs.
"""

from runtime_core.hosting._commands import RuntimeCommands
from runtime_core.hosting._grpc_endpoint import LIVENESS_SERVICE, GrpcCommandEndpoint, HealthCheckServicer
from runtime_core.hosting._health_routes import HEALTH_ALIAS_PATH, LIVE_PATH, READY_PATH, health_endpoints
from runtime_core.hosting._heap import settle_started_heap
from runtime_core.hosting._http_endpoint import HttpCommandEndpoint, build_http_app
from runtime_core.hosting._options import (
    CONTROL_PLANE_ID_KEY,
    HOST_ID_KEY,
    TENANTS_FILE_ENV,
    RuntimeInstanceProcessOptions,
    add_process_arguments,
    build_arg_parser,
    options_from_args,
    parse_options,
    port_number,
    positive_int,
)
from runtime_core.hosting._process import (
    PROCESS_SERVICE_NAME,
    RuntimeInstanceHost,
    main,
    run_runtime_instance_process,
)
from runtime_core.hosting._uvicorn import EndpointBindError, UvicornEndpoint

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Process
    "run_runtime_instance_process",
    "main",
    "RuntimeInstanceHost",
    "PROCESS_SERVICE_NAME",
    "settle_started_heap",
    # Options
    "RuntimeInstanceProcessOptions",
    "build_arg_parser",
    "add_process_arguments",
    "options_from_args",
    "parse_options",
    "TENANTS_FILE_ENV",
    "positive_int",
    "port_number",
    "CONTROL_PLANE_ID_KEY",
    "HOST_ID_KEY",
    # Command endpoints
    "RuntimeCommands",
    "HttpCommandEndpoint",
    "GrpcCommandEndpoint",
    "build_http_app",
    # HTTP serving and health
    "UvicornEndpoint",
    "EndpointBindError",
    "health_endpoints",
    "LIVE_PATH",
    "READY_PATH",
    "HEALTH_ALIAS_PATH",
    "HealthCheckServicer",
    "LIVENESS_SERVICE",
]
