"""The Anthropic Messages provider (`POST /v1/messages`).

Owns the Messages wire format: `x-api-key` and `anthropic-version` headers, the request
body (messages, top-level `system`, `max_tokens`, caller params, structured output as
`output_config: {format: {type: json_schema, schema}}`), and reading the reply's text
blocks, model and token usage. Must not validate structured output (the `ai.prompt`
executor does) nor classify HTTP failures (`_http_endpoint` does).
"""

from __future__ import annotations

from typing import Any

from runtime_core.steps._executor import StepFailure
from runtime_core.steps.llm._http_provider import HttpLlmProvider
from runtime_core.steps.llm._provider import LlmReply, LlmRequest, TokenUsage
from runtime_core.steps.llm._settings import AnthropicSettings

MESSAGES_PATH = "/v1/messages"
# Fields the provider sets itself; a step's `params` may not replace them.
ANTHROPIC_RESERVED_PARAMS = frozenset({"model", "messages", "system", "output_config", "stream"})


class AnthropicProvider(HttpLlmProvider[AnthropicSettings]):
    async def complete(self, request: LlmRequest) -> LlmReply:
        model = request.model or self.default_model
        body: dict[str, Any] = {
            "max_tokens": self.settings.max_tokens,
            **request.params,
            "model": model,
            "messages": [{"role": "user", "content": request.prompt}],
        }
        if request.system:
            body["system"] = request.system
        if request.response_schema is not None:
            body["output_config"] = {"format": {"type": "json_schema", "schema": request.response_schema}}
        reply = await self.post(
            MESSAGES_PATH,
            body,
            headers={"anthropic-version": self.settings.anthropic_version},
            secret_headers={"x-api-key": self.api_key(self.settings.api_key_env)},
        )
        return _reply(reply, model, self.name)


def _reply(body: dict[str, Any], model: str, name: str) -> LlmReply:
    blocks = body.get("content")
    if not isinstance(blocks, list):
        raise StepFailure(f"LLM provider {name!r} answered without a content list", code="transient")
    if body.get("stop_reason") == "refusal":
        raise StepFailure(f"LLM provider {name!r}: the model refused to answer", code="permanent")
    text = "".join(
        str(block.get("text", ""))
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text"
    )
    usage = TokenUsage.from_reply(body, "input_tokens", "output_tokens")
    return LlmReply(text=text, model=str(body.get("model") or model), usage=usage)
