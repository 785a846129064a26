"""The OpenAI-compatible Chat Completions provider (OpenAI, Azure OpenAI, vLLM, llama.cpp, Ollama).

Owns the Chat Completions wire format: the request body (messages, caller params, the
`response_format: {type: json_schema}` for structured output), the API-key header, and
reading the reply's text, model and token usage. Must not validate structured output
(the `ai.prompt` executor does) nor classify HTTP failures (`_http_endpoint` does).
"""

from __future__ import annotations

from typing import Any

from runtime_core.steps._executor import StepFailure
from runtime_core.steps._http_endpoint import HttpEndpoint, json_object, secret_from_env
from runtime_core.steps.llm._provider import LlmReply, LlmRequest, TokenUsage
from runtime_core.steps.llm._settings import OpenAiCompatibleSettings

# Fields the provider sets itself; a step's `params` may not replace them.
OPENAI_RESERVED_PARAMS = frozenset({"model", "messages", "response_format", "stream"})


class OpenAiCompatibleProvider:
    def __init__(self, name: str, settings: OpenAiCompatibleSettings) -> None:
        self.name = name
        self.settings = settings
        self.default_model = settings.model
        self._endpoint = HttpEndpoint(settings)

    async def complete(self, request: LlmRequest) -> LlmReply:
        model = request.model or self.default_model
        body: dict[str, Any] = {**request.params, "model": model, "messages": _messages(request)}
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": request.response_schema,
                    "strict": request.schema_strict,
                },
            }
        path = self.settings.path
        response = await self._endpoint.request(
            "POST", path, secret_headers=self._auth_headers(), params=self.settings.query, json=body
        )
        return _reply(json_object(response, f"LLM provider {self.name!r}"), model, self.name)

    def _auth_headers(self) -> dict[str, str]:
        if self.settings.api_key_env is None:
            return {}
        key = secret_from_env(self.settings.api_key_env, f"the API key of LLM provider {self.name!r}")
        if self.settings.api_key_header == "api-key":
            return {"api-key": key}
        return {"Authorization": f"Bearer {key}"}

    async def aclose(self) -> None:
        await self._endpoint.aclose()


def _messages(request: LlmRequest) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": request.system}] if request.system else []
    return [*messages, {"role": "user", "content": request.prompt}]


def _reply(body: dict[str, Any], model: str, name: str) -> LlmReply:
    try:
        message = body["choices"][0]["message"]
        content = message.get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise StepFailure(
            f"LLM provider {name!r} answered without choices[0].message", code="transient"
        ) from None
    if not isinstance(content, str):
        refusal = message.get("refusal")
        if refusal:
            raise StepFailure(
                f"LLM provider {name!r}: the model refused: {str(refusal)[:200]}", code="permanent"
            )
        raise StepFailure(f"LLM provider {name!r} answered without message content", code="transient")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return LlmReply(
        text=content,
        model=str(body.get("model") or model),
        usage=TokenUsage(
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        ),
    )
