"""Runtime providers: HOW the control plane reaches a runtime instance.

Owns the transport-neutral provider protocol (dispatch / enqueue, run status, cancel, queue
pause / resume, capacity, scale-out) with JSON-serializable pydantic requests, the
in-process LOCAL provider, provider metadata (`provider.name`, `transport.name`,
`transport.endpoint`) and the provider selector. Must not own recovery or tenancy, execute
steps or mutate DAG state.
"""

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
from runtime_core.providers._selector import ProviderSelector

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
    "ProviderSelector",
]
