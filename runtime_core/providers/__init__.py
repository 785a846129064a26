"""Runtime providers: HOW the control plane reaches a runtime instance.

Owns the transport-neutral provider protocol (dispatch / enqueue, run status, cancel, queue
pause / resume, capacity, scale-out) with JSON-serializable pydantic requests, the
in-process LOCAL provider, the HTTP (httpx) and gRPC (`grpc.aio`) providers with their wire
contract (routes, `proto/runtime_provider.proto`, the runtime error envelope) and their
process scale-out through the runtime host manager, provider metadata (`provider.name`,
`transport.name`, `transport.endpoint`), the back-off from instances a dispatch could not
reach, and the provider selector. Must not own recovery
or tenancy, execute steps or mutate DAG state.
"""

from runtime_core.providers._backoff import UnansweredDispatches
from runtime_core.providers._grpc import GRPC_METHODS, GRPC_PROVIDER_NAME, GrpcRuntimeProvider
from runtime_core.providers._http import (
    HTTP_PROVIDER_NAME,
    HTTP_ROUTES,
    HttpRuntimeProvider,
    http_path,
)
from runtime_core.providers._local import LOCAL_PROVIDER_NAME, LocalRuntimeProvider
from runtime_core.providers._protocol import (
    CancelRunRequest,
    DispatchRequest,
    DispatchResponse,
    ProviderError,
    ProviderMetadata,
    QueueControlRequest,
    RunRef,
    RuntimeProvider,
    ScaleOutProvider,
    ScaleOutProvisionRequest,
    ScaleOutProvisionResult,
)
from runtime_core.providers._remote import RemoteRuntimeProvider
from runtime_core.providers._selector import ProviderSelector
from runtime_core.providers._wire import INVALID_REQUEST_CODE, Command, InstanceRef, WireError

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Protocol
    "RuntimeProvider",
    "ScaleOutProvider",
    "ProviderMetadata",
    "ProviderError",
    # Requests and responses
    "DispatchRequest",
    "DispatchResponse",
    "RunRef",
    "CancelRunRequest",
    "QueueControlRequest",
    "ScaleOutProvisionRequest",
    "ScaleOutProvisionResult",
    # Providers
    "LocalRuntimeProvider",
    "LOCAL_PROVIDER_NAME",
    "HttpRuntimeProvider",
    "HTTP_PROVIDER_NAME",
    "GrpcRuntimeProvider",
    "GRPC_PROVIDER_NAME",
    "RemoteRuntimeProvider",
    "ProviderSelector",
    "UnansweredDispatches",
    # Wire contract of the HTTP / gRPC command endpoints
    "Command",
    "InstanceRef",
    "WireError",
    "INVALID_REQUEST_CODE",
    "HTTP_ROUTES",
    "http_path",
    "GRPC_METHODS",
]
