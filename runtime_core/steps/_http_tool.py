"""The `tool.http` executor: one HTTP(S) request, with failures classified for the retry engine.

Owns the request shape and its operation: the call goes through `guarded_call`, so its
operation id is recorded before the request and sent as `Idempotency-Key` (configurable);
after a crash mid-request the step's `onUncertain` policy settles it (default: `retry` for
the idempotent methods GET / HEAD / PUT / DELETE, `fail` for POST / PATCH), `reconcile`
asking `statusUrl`. Replies and transport errors become StepFailures through
`_http_failures` (5xx/429/connect errors `transient`, 429/503 with their `Retry-After`,
timeouts and 408 `timeout`, other 3xx/4xx `permanent`); a request that may have reached the
peer unanswered leaves its operation in doubt. Must not retry by itself: retries belong to
the engine's retry policy.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
from pydantic import Field, model_validator

from runtime_core.policy import PROVIDER_RETRY
from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._http_failures import failure_for_status, failure_for_transport
from runtime_core.steps._results import canonical, step_result
from runtime_core.steps.operations import (
    DECISION_INPUT_SCHEMA,
    OutcomeUnknown,
    UncertaintyPolicy,
    guarded_call,
)

ALLOWED_SCHEMES = frozenset({"http", "https"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})  # RFC 9110 9.2.2
OPERATION_ID_PLACEHOLDER = "{operationId}"
# Errors raised before a request left this process: nothing can have taken effect.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)

HttpMethod = Literal["GET", "HEAD", "DELETE", "POST", "PUT", "PATCH"]


class HttpToolConfig(StepConfig):
    """`onUncertain` None: `retry` for idempotent methods, `fail` for POST / PATCH.
    `statusUrl` (for `reconcile`) may contain `{operationId}`; 200 means the operation took
    effect (its body is the step's data), 404 that it did not."""

    url: str
    method: HttpMethod = "GET"
    headers: dict[str, str] = {}
    timeout_seconds: float = Field(default=10.0, gt=0)
    on_uncertain: UncertaintyPolicy | None = None
    idempotency_header: str | None = Field(default="Idempotency-Key", min_length=1)
    status_url: str | None = None

    @model_validator(mode="after")
    def _reconcile_needs_status(self) -> HttpToolConfig:
        if self.on_uncertain is UncertaintyPolicy.RECONCILE and not self.status_url:
            raise ValueError("onUncertain 'reconcile' needs statusUrl, the peer's status endpoint")
        return self

    @property
    def policy(self) -> UncertaintyPolicy:
        if self.on_uncertain is not None:
            return self.on_uncertain
        return UncertaintyPolicy.RETRY if self.method in IDEMPOTENT_METHODS else UncertaintyPolicy.FAIL


class HttpToolExecutor:
    """POST/PUT/PATCH send the inputs as a JSON body; other methods send them as query parameters.

    `data` is the parsed JSON response (or its text when it is not JSON).
    """

    step_key = "tool.http"
    config_model = HttpToolConfig
    description = (
        "Call an HTTP(S) endpoint with the step's inputs (Idempotency-Key: the step's operation id); "
        "failures are classified for retries, a call cut by a crash is settled by onUncertain."
    )
    default_retry = PROVIDER_RETRY
    input_schema = DECISION_INPUT_SCHEMA

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(HttpToolConfig, invocation)
        url = _checked_url(config.url)
        request_body = _request_arguments(config.method, invocation.inputs)
        what = f"{config.method} {url}"

        async def call(operation_id: str) -> dict[str, Any]:
            headers = _with_operation(config, operation_id)
            response = await _send(config, config.method, url, what, headers=headers, **request_body)
            failure = failure_for_status(what, response, credentials=_credentials(config))
            if failure is not None:
                raise failure
            return _result(config.method, url, response, operation_id)

        async def reconcile(operation_id: str) -> dict[str, Any] | None:
            return await _status(config, operation_id)

        return await guarded_call(
            invocation,
            "request",
            config.policy,
            call,
            reconcile=reconcile,
            from_decision=lambda decision: step_result(decision.result, settledBy="human", url=str(url)),
            peer=what,
        )


async def _send(
    config: HttpToolConfig, method: str, url: httpx.URL, what: str, **arguments: Any
) -> httpx.Response:
    try:
        async with httpx.AsyncClient(timeout=config.timeout_seconds, follow_redirects=False) as client:
            return await client.request(method, url, **arguments)
    except _NOT_SENT as error:
        raise failure_for_transport(what, error) from error
    except httpx.TransportError as error:
        raise OutcomeUnknown(failure_for_transport(what, error)) from error


async def _status(config: HttpToolConfig, operation_id: str) -> dict[str, Any] | None:
    """The operation's outcome at `statusUrl`: its data (200), None when the peer never saw it (404)."""
    assert config.status_url is not None
    url = _checked_url(config.status_url.replace(OPERATION_ID_PLACEHOLDER, operation_id))
    what = f"GET {url}"
    response = await _send(config, "GET", url, what, headers=_with_operation(config, operation_id))
    if response.status_code == 404:
        return None
    failure = failure_for_status(what, response, credentials=_credentials(config))
    if failure is not None:
        raise failure
    return _result("GET", url, response, operation_id, reconciled=True)


def _credentials(config: HttpToolConfig) -> str:
    """What a 401 / 403 refused: the step's configured headers (their names, never their values)."""
    if not config.headers:
        return "a request without credentials (config.headers is empty)"
    return f"the step's config.headers ({', '.join(sorted(config.headers))})"


def _with_operation(config: HttpToolConfig, operation_id: str) -> dict[str, str]:
    if config.idempotency_header is None:
        return dict(config.headers)
    return {**config.headers, config.idempotency_header: operation_id}


def _result(
    method: str, url: httpx.URL, response: httpx.Response, operation_id: str, *, reconciled: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"reconciled": True} if reconciled else {}
    return step_result(
        _response_data(response),
        method=method,
        status=response.status_code,
        url=str(url),
        operationId=operation_id,
        **meta,
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
