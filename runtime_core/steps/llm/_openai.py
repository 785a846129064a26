"""The OpenAI-compatible Chat Completions provider (OpenAI, Azure OpenAI, vLLM, llama.cpp, Ollama).

Owns the Chat Completions wire format: the request body (messages, caller params, the
`response_format: {type: json_schema}` for structured output), the API-key header, and
reading the reply's text, model and token usage. Must not validate structured output
(the `ai.prompt` executor does) nor classify HTTP failures (`_http_endpoint` does).
"""

from __future__ import annotations

from typing import Any

from runtime_core.steps._executor import StepFailure
from runtime_core.steps.llm._http_provider import HttpLlmProvider
from runtime_core.steps.llm._provider import LlmReply, LlmRequest, TokenUsage
from runtime_core.steps.llm._settings import OpenAiCompatibleSettings

# Fields the provider sets itself; a step's `params` may not replace them.
OPENAI_RESERVED_PARAMS = frozenset({"model", "messages", "response_format", "stream"})


class OpenAiCompatibleProvider(HttpLlmProvider[OpenAiCompatibleSettings]):
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
        reply = await self.post(
            self.settings.path, body, secret_headers=self._auth_headers(), params=self.settings.query
        )
        return _reply(reply, model, self.name)

    def _auth_headers(self) -> dict[str, str]:
        if self.settings.api_key_env is None:
            return {}
        key = self.api_key(self.settings.api_key_env)
        if self.settings.api_key_header == "api-key":
            return {"api-key": key}
        return {"Authorization": f"Bearer {key}"}


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
    usage = TokenUsage.from_reply(body, "prompt_tokens", "completion_tokens")
    return LlmReply(text=content, model=str(body.get("model") or model), usage=usage)
