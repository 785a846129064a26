"""The OpenAI-compatible Chat Completions provider (OpenAI, Azure OpenAI, vLLM, llama.cpp, Ollama).

Owns the Chat Completions wire format: the request body (messages with assistant
`tool_calls` and `tool` results, `tools` as functions, caller params, the
`response_format: {type: json_schema}` for structured output), the API-key header, and
reading the reply's text, tool calls, model and token usage, whole or streamed
(`stream: true` with `stream_options.include_usage`: content and tool-call deltas assembled
into the same reply). Must not validate structured output (the `ai.prompt` executor does)
nor classify HTTP failures (`_http_endpoint` does).
"""

from __future__ import annotations

import json
from typing import Any

from runtime_core.steps._executor import StepFailure
from runtime_core.steps.llm._chat import ChatMessage, TextSink, ToolCall
from runtime_core.steps.llm._http_provider import HttpLlmProvider
from runtime_core.steps.llm._provider import LlmReply, LlmRequest, TokenUsage
from runtime_core.steps.llm._settings import OpenAiCompatibleSettings

# Fields the provider sets itself; a step's `params` may not replace them.
OPENAI_RESERVED_PARAMS = frozenset(
    {"model", "messages", "response_format", "stream", "stream_options", "tools"}
)


class OpenAiCompatibleProvider(HttpLlmProvider[OpenAiCompatibleSettings]):
    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmReply:
        model = request.model or self.default_model
        body = self._body(request, model)
        if on_text is None:
            reply = await self.post(
                self.settings.path, body, secret_headers=self._auth_headers(), params=self.settings.query
            )
            return _reply(reply, model, self.name)
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        return await self._streamed(body, model, on_text)

    def _body(self, request: LlmRequest, model: str) -> dict[str, Any]:
        body: dict[str, Any] = {**request.params, "model": model, "messages": _messages(request)}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": request.response_schema,
                    "strict": request.schema_strict,
                },
            }
        return body

    async def _streamed(self, body: dict[str, Any], model: str, on_text: TextSink) -> LlmReply:
        assembled = _StreamedReply(model)
        events = self.post_stream(
            self.settings.path, body, secret_headers=self._auth_headers(), params=self.settings.query
        )
        async for _, chunk in events:
            text = assembled.add(chunk)
            if text:
                await on_text(text)
        return assembled.reply(self.name)

    def _auth_headers(self) -> dict[str, str]:
        if self.settings.api_key_env is None:
            return {}
        key = self.api_key(self.settings.api_key_env)
        if self.settings.api_key_header == "api-key":
            return {"api-key": key}
        return {"Authorization": f"Bearer {key}"}


def _messages(request: LlmRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    return [*messages, *(_message(m) for m in request.conversation())]


def _message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if message.role == "user" or not message.tool_calls:
        return {"role": message.role, "content": message.text}
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments, sort_keys=True)},
        }
        for call in message.tool_calls
    ]
    return {"role": "assistant", "content": message.text or None, "tool_calls": calls}


def _reply(body: dict[str, Any], model: str, name: str) -> LlmReply:
    try:
        choice = body["choices"][0]
        message = choice["message"]
        content = message.get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise StepFailure(
            f"LLM provider {name!r} answered without choices[0].message", code="transient"
        ) from None
    calls = [_tool_call(call, name) for call in message.get("tool_calls") or []]
    if not isinstance(content, str) and not calls:
        _raise_refusal(message.get("refusal"), name)
        raise StepFailure(f"LLM provider {name!r} answered without message content", code="transient")
    return LlmReply(
        text=content if isinstance(content, str) else "",
        model=str(body.get("model") or model),
        usage=TokenUsage.from_reply(body, "prompt_tokens", "completion_tokens"),
        tool_calls=calls,
        stop_reason=choice.get("finish_reason"),
    )


def _raise_refusal(refusal: Any, name: str) -> None:
    if refusal:
        raise StepFailure(f"LLM provider {name!r}: the model refused: {str(refusal)[:200]}", code="permanent")


def _tool_call(call: Any, name: str) -> ToolCall:
    try:
        function = call["function"]
        return ToolCall(id=str(call["id"]), name=str(function["name"]), arguments=_arguments(function))
    except (KeyError, TypeError):
        raise StepFailure(f"LLM provider {name!r} answered a malformed tool call", code="transient") from None


def _arguments(function: dict[str, Any]) -> dict[str, Any]:
    raw = function.get("arguments") or "{}"
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise StepFailure(
            f"the model's arguments for tool {function.get('name')!r} are not a JSON object",
            code="invalid_output",
        )
    return value


class _StreamedReply:
    """Chat Completions chunks assembled into the reply the same call without streaming gives."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}

    def add(self, chunk: dict[str, Any]) -> str:
        """Take one chunk in; the text it adds."""
        self.model = str(chunk.get("model") or self.model)
        if isinstance(chunk.get("usage"), dict):
            self.usage = {"usage": chunk["usage"]}
        choices = chunk.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return ""
        choice = choices[0]
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = choice.get("delta") or {}
        for call in delta.get("tool_calls") or []:
            slot = self.calls.setdefault(int(call.get("index", 0)), {"arguments": ""})
            slot["id"] = call.get("id") or slot.get("id")
            function = call.get("function") or {}
            slot["name"] = function.get("name") or slot.get("name")
            slot["arguments"] += function.get("arguments") or ""
        if delta.get("refusal"):
            self.refusal.append(str(delta["refusal"]))
        text = delta.get("content") or ""
        self.text.append(text)
        return text

    def reply(self, name: str) -> LlmReply:
        calls = [
            _tool_call({"id": slot.get("id"), "function": slot}, name)
            for _, slot in sorted(self.calls.items())
        ]
        if not calls and not "".join(self.text):
            _raise_refusal("".join(self.refusal), name)
        return LlmReply(
            text="".join(self.text),
            model=self.model,
            usage=TokenUsage.from_reply(self.usage, "prompt_tokens", "completion_tokens"),
            tool_calls=calls,
            stop_reason=self.finish_reason,
        )
