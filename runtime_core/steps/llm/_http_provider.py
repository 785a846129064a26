"""What every HTTP LLM provider shares: its configured name and model, one pooled endpoint, its API key.

Owns posting a JSON body to the provider's endpoint and returning the reply object (failures
come classified from `_http_endpoint`), posting one whose reply is a stream of Server-Sent
Events (parsed by `httpx-sse`) and yielding its JSON events, and reading the API key from the
environment at call time. Must not know any wire format: subclasses build bodies and read
replies.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Generic, TypeVar

from httpx_sse import EventSource, SSEError

from runtime_core.steps._executor import StepFailure
from runtime_core.steps._http_endpoint import HttpEndpoint, json_object, secret_from_env
from runtime_core.steps.llm._settings import AnthropicSettings, OpenAiCompatibleSettings

SettingsT = TypeVar("SettingsT", OpenAiCompatibleSettings, AnthropicSettings)
STREAM_END = "[DONE]"
"""The data line that ends an OpenAI-style stream (not JSON)."""


class HttpLlmProvider(Generic[SettingsT]):
    def __init__(self, name: str, settings: SettingsT) -> None:
        self.name = name
        self.settings = settings
        self.default_model = settings.model
        self._endpoint = HttpEndpoint(settings, _credentials(name, settings.api_key_env))

    def api_key(self, variable: str) -> str:
        return secret_from_env(variable, f"the API key of LLM provider {self.name!r}")

    async def post(
        self,
        path: str,
        body: dict[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        secret_headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The reply object of `POST path`; any failure is a classified StepFailure."""
        response = await self._endpoint.request(
            "POST", path, headers=headers, secret_headers=secret_headers, params=params, json=body
        )
        return json_object(response, f"LLM provider {self.name!r}")

    async def post_stream(
        self,
        path: str,
        body: dict[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        secret_headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """`(event name, JSON data)` of each event of the streamed reply to `POST path`, until the
        stream ends (or its `[DONE]` line). A stream cut short or not SSE is a transient failure."""
        async with self._endpoint.stream(
            "POST", path, headers=headers, secret_headers=secret_headers, params=params, json=body
        ) as response:
            try:
                async for event in EventSource(response).aiter_sse():
                    if event.data == STREAM_END:
                        return
                    if not event.data:
                        continue
                    yield event.event, self._event_data(event.data)
            except SSEError as error:
                raise StepFailure(
                    f"LLM provider {self.name!r} did not answer with an event stream: {error}",
                    code="transient",
                ) from None

    def _event_data(self, data: str) -> dict[str, Any]:
        try:
            value = json.loads(data)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise StepFailure(f"LLM provider {self.name!r} streamed an event that is not a JSON object")
        return value

    async def aclose(self) -> None:
        await self._endpoint.aclose()


def _credentials(name: str, api_key_env: str | None) -> str:
    """What a 401 / 403 of the provider refused, naming the providers file entry and its variable."""
    if api_key_env is None:
        return f"llm entry '{name}', which sends no API key (it has no api_key_env: set one)"
    return f"the API key in {api_key_env} (api_key_env of llm entry '{name}')"
