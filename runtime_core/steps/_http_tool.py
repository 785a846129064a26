"""The `tool.http` executor: one HTTP(S) request, with failures classified for the retry engine.

Owns the request shape. Replies and transport errors become StepFailures through
`_http_failures` (5xx/429/connect errors `transient`, 429/503 with their `Retry-After`,
timeouts and 408 `timeout`, other 3xx/4xx `permanent`). Must not retry by itself: retries
belong to the engine's retry policy.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
from pydantic import Field

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._http_failures import failure_for_status, failure_for_transport
from runtime_core.steps._results import canonical, step_result

ALLOWED_SCHEMES = frozenset({"http", "https"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

HttpMethod = Literal["GET", "HEAD", "DELETE", "POST", "PUT", "PATCH"]


class HttpToolConfig(StepConfig):
    url: str
    method: HttpMethod = "GET"
    headers: dict[str, str] = {}
    timeout_seconds: float = Field(default=10.0, gt=0)


class HttpToolExecutor:
    """POST/PUT/PATCH send the inputs as a JSON body; other methods send them as query parameters.

    `data` is the parsed JSON response (or its text when it is not JSON).
    """

    step_key = "tool.http"
    config_model = HttpToolConfig
    description = "Call an HTTP(S) endpoint with the step's inputs; failures are classified for retries."

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(HttpToolConfig, invocation)
        url = _checked_url(config.url)
        request_body = _request_arguments(config.method, invocation.inputs)
        what = f"{config.method} {url}"
        try:
            async with httpx.AsyncClient(timeout=config.timeout_seconds, follow_redirects=False) as client:
                response = await client.request(config.method, url, headers=config.headers, **request_body)
        except httpx.TransportError as error:
            raise failure_for_transport(what, error) from error
        failure = failure_for_status(what, response)
        if failure is not None:
            raise failure
        return step_result(
            _response_data(response), method=config.method, status=response.status_code, url=str(url)
        )


def _checked_url(raw: str) -> httpx.URL:
    try:
        url = httpx.URL(raw)
    except httpx.InvalidURL as error:
        raise StepFailure(f"tool.http url {raw!r} is not a valid URL", code="permanent") from error
    if url.scheme not in ALLOWED_SCHEMES or not url.host:
        raise StepFailure(f"tool.http url {raw!r} must be an absolute http(s) URL", code="permanent")
    return url


def _request_arguments(method: str, inputs: dict[str, Any]) -> dict[str, Any]:
    if method in BODY_METHODS:
        return {"json": canonical(inputs)}
    params = {name: _query_value(inputs[name]) for name in sorted(inputs)}
    return {"params": params} if params else {}


def _query_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _response_data(response: httpx.Response) -> Any:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            return response.json()
        except ValueError:
            return response.text
    return response.text
