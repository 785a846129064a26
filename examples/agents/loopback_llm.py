"""A loopback LLM server: the OpenAI Chat Completions and Anthropic Messages wire formats, offline.

It plays a scripted model so the agent example (and the tests) run without an API key:
a script is a list of turns, and the reply to a request is the turn whose index is the
number of assistant messages in its conversation, so the same request always gets the same
reply and a resumed agent continues where it stopped. A turn is `{"text": "..."}` (the final
answer) or `{"tool_calls": [{"name": "...", "arguments": {...}}], "text": "optional"}`.
Both formats answer whole or streamed (`"stream": true`: Server-Sent Events, text in small
pieces, tool-call arguments as partial JSON, usage at the end).

It counts completed turns: a turn counts once its whole reply went out, per conversation
(its first user message) and turn index; `GET /turns` lists the counts (a turn completed
twice would mean a model call was repeated); `GET /readyz` answers once it serves.
`hold(turn)` makes a reply wait until
`release(turn)`; a client that goes away meanwhile is not answered and nothing is counted.
`pause_streams(after)` stops streamed replies after that many events until `resume_streams()`
(a model caught mid-answer; `paused_streams` counts the replies waiting there).

    python examples/agents/loopback_llm.py --port 8781 --script examples/agents/model-script.json

serves `http://127.0.0.1:8781/v1/chat/completions` and `http://127.0.0.1:8781/v1/messages`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
INPUT_TOKENS = 20
OUTPUT_TOKENS = 8
PIECE_CHARS = 4
HOLD_POLL_S = 0.02


class LoopbackLlm:
    def __init__(self, script: list[dict[str, Any]], *, piece_delay_s: float = 0.0) -> None:
        self.script = script
        self.piece_delay_s = piece_delay_s  # between streamed pieces: a slow model
        self.completed: Counter[tuple[str, int]] = Counter()
        self.requests: list[dict[str, Any]] = []
        self._held: dict[int, asyncio.Event] = {}
        self.waiting: set[int] = set()  # held turns a request waits on now
        self._pause: tuple[int, asyncio.Event] | None = None
        self.paused_streams = 0  # streamed replies waiting at the pause now
        self.app = Starlette(
            routes=[
                Route(OPENAI_PATH, self._openai, methods=["POST"]),
                Route(ANTHROPIC_PATH, self._anthropic, methods=["POST"]),
                Route("/turns", self._turns, methods=["GET"]),
                Route("/readyz", self._ready, methods=["GET"]),
            ]
        )

    def hold(self, turn: int) -> None:
        self._held[turn] = asyncio.Event()

    def release(self, turn: int) -> None:
        held = self._held.pop(turn, None)
        if held is not None:
            held.set()

    def pause_streams(self, after: int) -> None:
        self._pause = (after, asyncio.Event())

    def resume_streams(self) -> None:
        if self._pause is not None:
            self._pause[1].set()
            self._pause = None

    def twice(self) -> list[tuple[str, int]]:
        """Turns whose reply went out more than once."""
        return [key for key, count in self.completed.items() if count > 1]

    async def _turns(self, request: Request) -> JSONResponse:
        return JSONResponse(
            [{"conversation": c, "turn": t, "completed": n} for (c, t), n in self.completed.items()]
        )

    async def _ready(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ready"})

    async def _openai(self, request: Request) -> Response:
        body = await request.json()
        messages = body.get("messages", [])
        conversation = next((m.get("content") for m in messages if m.get("role") == "user"), "")
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return await self._answer(request, body, str(conversation), turn, _OpenAiWire(body["model"], turn))

    async def _anthropic(self, request: Request) -> Response:
        body = await request.json()
        messages = body.get("messages", [])
        first = next((m.get("content") for m in messages if m.get("role") == "user"), "")
        conversation = first if isinstance(first, str) else json.dumps(first, sort_keys=True)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return await self._answer(request, body, conversation, turn, _AnthropicWire(body["model"], turn))

    async def _answer(
        self, request: Request, body: dict[str, Any], conversation: str, turn: int, wire: Any
    ) -> Response:
        self.requests.append(body)
        if not await self._held_until_released(request, turn):
            return Response(status_code=499)
        scripted = self.script[min(turn, len(self.script) - 1)]
        key = (conversation, turn)
        if not body.get("stream"):
            if await request.is_disconnected():
                return Response(status_code=499)
            self.completed[key] += 1
            return JSONResponse(wire.whole(scripted))

        async def events() -> AsyncIterator[str]:
            pause = self._pause
            for sent, event in enumerate(wire.streamed(scripted), 1):
                yield event
                if pause is not None and sent == pause[0]:
                    await self._paused(pause[1])
                if self.piece_delay_s:
                    await asyncio.sleep(self.piece_delay_s)
            self.completed[key] += 1

        return StreamingResponse(events(), media_type="text/event-stream")

    async def _paused(self, resumed: asyncio.Event) -> None:
        self.paused_streams += 1
        try:
            await resumed.wait()
        finally:
            self.paused_streams -= 1

    async def _held_until_released(self, request: Request, turn: int) -> bool:
        """False when the client went away while its turn was held."""
        held = self._held.get(turn)
        if held is None:
            return True
        self.waiting.add(turn)
        try:
            while not held.is_set():
                if await request.is_disconnected():
                    return False
                try:
                    await asyncio.wait_for(held.wait(), HOLD_POLL_S)
                except TimeoutError:
                    continue
            return True
        finally:
            self.waiting.discard(turn)


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS)]


def _sse(data: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


class _OpenAiWire:
    def __init__(self, model: str, turn: int) -> None:
        self.model, self.turn = model, turn

    def _calls(self, scripted: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "id": f"call_{self.turn}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))},
            }
            for i, c in enumerate(scripted.get("tool_calls", []))
        ]

    def whole(self, scripted: dict[str, Any]) -> dict[str, Any]:
        calls = self._calls(scripted)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": scripted.get("text") or (None if calls else ""),
        }
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{self.turn}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {
                "prompt_tokens": INPUT_TOKENS,
                "completion_tokens": OUTPUT_TOKENS,
                "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
            },
        }

    def streamed(self, scripted: dict[str, Any]) -> list[str]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return _sse(
                {
                    "id": f"chatcmpl-{self.turn}",
                    "object": "chat.completion.chunk",
                    "model": self.model,
                    "choices": [choice],
                }
            )

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in _pieces(scripted.get("text", ""))]
        calls = self._calls(scripted)
        for index, call in enumerate(calls):
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            events.append(chunk({"tool_calls": [head]}))
            for piece in _pieces(call["function"]["arguments"]):
                events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        events.append(chunk({}, "tool_calls" if calls else "stop"))
        usage = {
            "prompt_tokens": INPUT_TOKENS,
            "completion_tokens": OUTPUT_TOKENS,
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        }
        events.append(
            _sse(
                {
                    "id": f"chatcmpl-{self.turn}",
                    "object": "chat.completion.chunk",
                    "model": self.model,
                    "choices": [],
                    "usage": usage,
                }
            )
        )
        return [*events, "data: [DONE]\n\n"]


class _AnthropicWire:
    def __init__(self, model: str, turn: int) -> None:
        self.model, self.turn = model, turn

    def _blocks(self, scripted: dict[str, Any]) -> list[dict[str, Any]]:
        text = [{"type": "text", "text": scripted["text"]}] if scripted.get("text") else []
        uses = [
            {
                "type": "tool_use",
                "id": f"toolu_{self.turn}_{i}",
                "name": c["name"],
                "input": c.get("arguments", {}),
            }
            for i, c in enumerate(scripted.get("tool_calls", []))
        ]
        return [*text, *uses]

    def whole(self, scripted: dict[str, Any]) -> dict[str, Any]:
        blocks = self._blocks(scripted)
        return {
            "id": f"msg_{self.turn}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks,
            "stop_reason": "tool_use" if scripted.get("tool_calls") else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
        }

    def streamed(self, scripted: dict[str, Any]) -> list[str]:
        start = {
            "id": f"msg_{self.turn}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1},
        }
        events = [_sse({"type": "message_start", "message": start}, "message_start")]
        for index, block in enumerate(self._blocks(scripted)):
            if block["type"] == "text":
                events.append(
                    _sse(
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                        "content_block_start",
                    )
                )
                deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
            else:
                opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                events.append(
                    _sse(
                        {"type": "content_block_start", "index": index, "content_block": opened},
                        "content_block_start",
                    )
                )
                deltas = [
                    {"type": "input_json_delta", "partial_json": piece}
                    for piece in _pieces(json.dumps(block["input"]))
                ]
            events += [
                _sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta")
                for d in deltas
            ]
            events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        stop = "tool_use" if scripted.get("tool_calls") else "end_turn"
        events.append(
            _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": OUTPUT_TOKENS},
                },
                "message_delta",
            )
        )
        return [*events, _sse({"type": "message_stop"}, "message_stop")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8781)
    parser.add_argument("--script", type=Path, required=True, help="JSON list of turns")
    arguments = parser.parse_args()
    import uvicorn

    server = LoopbackLlm(json.loads(arguments.script.read_text(encoding="utf-8")))
    uvicorn.run(server.app, host=arguments.host, port=arguments.port, log_level="warning")


if __name__ == "__main__":
    main()
