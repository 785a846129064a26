"""The HTTP runtime provider: commands to a runtime-instance process's starlette endpoint (httpx).

Owns the route table both sides use (`HTTP_ROUTES`: POST /runtime/{rt}/dispatch, GET
/runtime/{rt}/runs/{lrun}, POST /runtime/{rt}/runs/{lrun}/cancel, POST
/runtime/{rt}/queue/pause|resume, GET /runtime/{rt}/capacity) and the client: pydantic
JSON bodies, the W3C trace context in the headers, a timeout per call, runtime errors
re-raised as their own class from the `{code, message, hint}` envelope, and every transport
failure (refused connection, timeout, 5xx without an envelope) raised as `ProviderError`.
Must not retry a dispatch.
"""

from __future__ import annotations

from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from runtime_core.instances import HostTransport, InstanceRegistry, RuntimeHostManager
from runtime_core.observability import inject_context
from runtime_core.providers._protocol import ProviderError
from runtime_core.providers._remote import DEFAULT_TIMEOUT_S, RemoteRuntimeProvider
from runtime_core.providers._wire import Command, WireError

HTTP_PROVIDER_NAME = HostTransport.HTTP.value

HTTP_ROUTES: dict[Command, tuple[str, str]] = {
    Command.DISPATCH: ("POST", "/runtime/{runtime_instance_id}/dispatch"),
    Command.RUN_STATUS: ("GET", "/runtime/{runtime_instance_id}/runs/{local_run_id}"),
    Command.CANCEL_RUN: ("POST", "/runtime/{runtime_instance_id}/runs/{local_run_id}/cancel"),
    Command.PAUSE_QUEUE: ("POST", "/runtime/{runtime_instance_id}/queue/pause"),
    Command.RESUME_QUEUE: ("POST", "/runtime/{runtime_instance_id}/queue/resume"),
    Command.CAPACITY: ("GET", "/runtime/{runtime_instance_id}/capacity"),
}


def http_path(command: Command, request: BaseModel) -> str:
    """The route of `command` with the request's ids filled in (percent-encoded)."""
    _, template = HTTP_ROUTES[command]
    ids = request.model_dump(include={"runtime_instance_id", "local_run_id"})
    return template.format_map({key: quote(value, safe="") for key, value in ids.items()})


class HttpRuntimeProvider(RemoteRuntimeProvider):
    """`provider.name = http`; one pooled httpx client for every HTTP runtime-instance process."""

    transport = HostTransport.HTTP

    def __init__(
        self,
        registry: InstanceRegistry,
        *,
        hosts: RuntimeHostManager | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        super().__init__(registry, hosts=hosts, timeout_s=timeout_s)
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), trust_env=False)

    async def _send(self, endpoint: str, command: Command, request: BaseModel) -> str:
        method, _ = HTTP_ROUTES[command]
        url = endpoint.rstrip("/") + http_path(command, request)
        body = request.model_dump_json() if method == "POST" else None
        headers = {"content-type": "application/json"}
        inject_context(headers)  # W3C traceparent of the current (dispatch) span, when tracing
        try:
            response = await self._client.request(method, url, content=body, headers=headers)
        except httpx.TransportError as exc:
            raise ProviderError(
                f"HTTP {method} {url} failed: {type(exc).__name__}: {exc}",
                hint="The runtime-instance process is unreachable; the run was not delivered.",
            ) from exc
        if response.is_success:
            return response.text
        error = _error_envelope(response)
        if error is not None:
            raise error.to_exception()
        raise ProviderError(
            f"HTTP {method} {url} answered {response.status_code} without a runtime error.",
            hint="The runtime-instance process failed; the run was not delivered.",
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def _error_envelope(response: httpx.Response) -> WireError | None:
    if not response.headers.get("content-type", "").startswith("application/json"):
        return None
    try:
        return WireError.model_validate_json(response.content)
    except ValidationError:
        return None
