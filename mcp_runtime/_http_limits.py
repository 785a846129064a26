"""A cap on HTTP request bodies, enforced before the MCP transport parses a single byte.

Owns MAX_REQUEST_BYTES and the ASGI middleware that answers 413 to a request whose body (as
declared by Content-Length, or as it streams in) is above it. The tool limits (run input
1 MiB, pipeline 4 MiB, ...) only apply once the JSON-RPC message is parsed; this keeps a
hostile client from making the server parse gigabytes first. Must not look at the content.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_REQUEST_BYTES = 8 * 1024 * 1024


class RequestSizeLimitMiddleware:
    """Reads each request body (at most `max_bytes`) before the app, then hands it over whole."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _declared_length(scope) > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size, message = 0, await receive()
        while message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
            message = await receive()
        first: list[Message] = [
            {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            if message["type"] == "http.request"
            else message
        ]

        async def replay() -> Message:
            return first.pop() if first else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        body = (
            b'{"error": "request_too_large", "error_description": "request body above '
            + str(self.max_bytes).encode()
            + b' bytes"}'
        )
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0
