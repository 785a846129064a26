"""What every HTTP LLM provider shares: its configured name and model, one pooled endpoint, its API key.

Owns posting a JSON body to the provider's endpoint and returning the reply object (failures
come classified from `_http_endpoint`), and reading the API key from the environment at
call time. Must not know any wire format: subclasses build bodies and read replies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from runtime_core.steps._http_endpoint import HttpEndpoint, json_object, secret_from_env
from runtime_core.steps.llm._settings import AnthropicSettings, OpenAiCompatibleSettings

SettingsT = TypeVar("SettingsT", OpenAiCompatibleSettings, AnthropicSettings)


class HttpLlmProvider(Generic[SettingsT]):
    def __init__(self, name: str, settings: SettingsT) -> None:
        self.name = name
        self.settings = settings
        self.default_model = settings.model
        self._endpoint = HttpEndpoint(settings)

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

    async def aclose(self) -> None:
        await self._endpoint.aclose()
