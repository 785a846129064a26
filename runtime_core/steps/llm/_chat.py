"""The provider-neutral conversation an LLM call carries: messages, tool calls and tool schemas.

Owns `ChatMessage` (user / assistant / tool turns of a tool-calling conversation), `ToolCall`
(one call the model asked for, arguments already parsed) and `ToolSpec` (a tool offered to
the model with its JSON schema), and `TextSink` (where a streaming call sends its text as it
arrives). Must not know any wire format: each provider maps these to its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TextSink = Callable[[str], Awaitable[None]]
"""Receives each piece of text a streaming call produces, in order."""


class ToolCall(BaseModel):
    """One tool call of an assistant turn; `id` is the provider's, echoed with the result."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = {}


class ChatMessage(BaseModel):
    """One turn: `user` text, an `assistant` reply (text and / or tool calls), or a `tool` result."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    tool_calls: list[ToolCall] = []
    tool_call_id: str | None = None
    is_error: bool = False


class ToolSpec(BaseModel):
    """A tool offered to the model: its name, what it does and the JSON schema of its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
