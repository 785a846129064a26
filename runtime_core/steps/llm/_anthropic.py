"""The Anthropic Messages provider (`POST <base_url>/messages`, base_url ending with `/v1`).

Owns the Messages wire format: `x-api-key` and `anthropic-version` headers, the request
body (messages with assistant `tool_use` blocks and user `tool_result` blocks, `tools`,
top-level `system`, `max_tokens`, caller params, structured output as `output_config:
{format: {type: json_schema, schema}}`), and reading the reply's text blocks, tool uses,
model and token usage, whole or streamed (`stream: true`: message_start,
content_block_start / delta / stop, message_delta events assembled into the same reply).
Must not validate structured output (the `ai.prompt` executor does) nor classify HTTP
failures (`_http_endpoint` does).
"""

from __future__ import annotations

import json
from typing import Any

from runtime_core.steps._executor import StepFailure
from runtime_core.steps.llm._chat import ChatMessage, TextSink, ToolCall
from runtime_core.steps.llm._http_provider import HttpLlmProvider
from runtime_core.steps.llm._provider import LlmReply, LlmRequest, TokenUsage
from runtime_core.steps.llm._settings import AnthropicSettings

MESSAGES_PATH = "/messages"
# Fields the provider sets itself; a step's `params` may not replace them.
ANTHROPIC_RESERVED_PARAMS = frozenset({"model", "messages", "system", "output_config", "stream", "tools"})


class AnthropicProvider(HttpLlmProvider[AnthropicSettings]):
    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmReply:
        model = request.model or self.default_model
        body: dict[str, Any] = {
            "max_tokens": self.settings.max_tokens,
            **request.params,
            "model": model,
            "messages": _messages(request.conversation()),
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        if request.response_schema is not None:
            body["output_config"] = {"format": {"type": "json_schema", "schema": request.response_schema}}
        headers = {"anthropic-version": self.settings.anthropic_version}
        key_env = self.settings.api_key_env
        secret_headers = {"x-api-key": self.api_key(key_env)} if key_env is not None else {}
        if on_text is None:
            reply = await self.post(MESSAGES_PATH, body, headers=headers, secret_headers=secret_headers)
            return _reply(reply, model, self.name)
        assembled = _StreamedMessage(model)
        events = self.post_stream(
            MESSAGES_PATH, {**body, "stream": True}, headers=headers, secret_headers=secret_headers
        )
        async for event, data in events:
            text = assembled.add(event or str(data.get("type", "")), data, self.name)
            if text:
                await on_text(text)
        return _reply(assembled.message(), model, self.name)


def _messages(conversation: list[ChatMessage]) -> list[dict[str, Any]]:
    """Anthropic's turns: tool results of one assistant turn go back together in one user turn."""
    messages: list[dict[str, Any]] = []
    for message in conversation:
        if message.role == "tool":
            block = {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.text}
            if message.is_error:
                block["is_error"] = True
            previous = messages[-1] if messages else None
            if previous and previous["role"] == "user" and isinstance(previous["content"], list):
                previous["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
        elif message.role == "assistant" and message.tool_calls:
            text = [{"type": "text", "text": message.text}] if message.text else []
            uses = [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in message.tool_calls
            ]
            messages.append({"role": "assistant", "content": [*text, *uses]})
        else:
            messages.append({"role": message.role, "content": message.text})
    return messages


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
    calls = [
        ToolCall(id=str(block.get("id")), name=str(block.get("name")), arguments=_input(block, name))
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]
    usage = TokenUsage.from_reply(body, "input_tokens", "output_tokens")
    return LlmReply(
        text=text,
        model=str(body.get("model") or model),
        usage=usage,
        tool_calls=calls,
        stop_reason=body.get("stop_reason"),
    )


def _input(block: dict[str, Any], name: str) -> dict[str, Any]:
    value = block.get("input")
    if not isinstance(value, dict):
        raise StepFailure(
            f"LLM provider {name!r}: the input of tool use {block.get('name')!r} is not a JSON object",
            code="invalid_output",
        )
    return value


class _StreamedMessage:
    """Messages stream events assembled into the message the same call without streaming gives."""

    def __init__(self, model: str) -> None:
        self.body: dict[str, Any] = {"model": model, "content": [], "usage": {}}
        self.partial_json: dict[int, str] = {}

    def add(self, event: str, data: dict[str, Any], name: str) -> str:
        """Take one event in; the text it adds."""
        body = self.body
        if event == "message_start":
            message = data.get("message") or {}
            body["model"] = message.get("model") or body["model"]
            body["usage"] = dict(message.get("usage") or {})
        elif event == "content_block_start":
            body["content"].append(dict(data.get("content_block") or {}))
        elif event == "content_block_delta":
            return self._delta(int(data.get("index", len(body["content"]) - 1)), data.get("delta") or {})
        elif event == "content_block_stop":
            self._close(int(data.get("index", len(body["content"]) - 1)), name)
        elif event == "message_delta":
            body["stop_reason"] = (data.get("delta") or {}).get("stop_reason")
            body["usage"].update(data.get("usage") or {})
        elif event == "error":
            error = data.get("error") or {}
            raise StepFailure(
                f"LLM provider {name!r} ended its stream with {error.get('type', 'an error')}: "
                f"{str(error.get('message', ''))[:200]}",
                code="transient",
            )
        return ""

    def _delta(self, index: int, delta: dict[str, Any]) -> str:
        block = self.body["content"][index]
        if delta.get("type") == "text_delta":
            text = str(delta.get("text", ""))
            block["text"] = block.get("text", "") + text
            return text
        if delta.get("type") == "input_json_delta":
            self.partial_json[index] = self.partial_json.get(index, "") + str(delta.get("partial_json", ""))
        return ""

    def _close(self, index: int, name: str) -> None:
        if index not in self.partial_json:
            return
        try:
            self.body["content"][index]["input"] = json.loads(self.partial_json.pop(index) or "{}")
        except ValueError:
            raise StepFailure(
                f"LLM provider {name!r} streamed tool input that is not JSON", code="invalid_output"
            ) from None

    def message(self) -> dict[str, Any]:
        return self.body
