"""A loopback webhook receiver (a real uvicorn HTTP server) for the webhook tests.

`WebhookReceiver` records every request (arrival time, headers, exact body) and answers as
its test says: fail the first `fail_first` requests with HTTP 500, then verify the signature
with `secret` (200 when valid, 401 otherwise); or never answer at all (`hang=True`).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from runtime_core.webhooks import EVENT_ID_HEADER, SIGNATURE_HEADER, verify_signature
from tests.helpers import wait_until


@dataclass(frozen=True)
class Received:
    at: float
    headers: dict[str, str]
    body: bytes

    @property
    def event_id(self) -> str:
        return self.headers[EVENT_ID_HEADER.lower()]

    def verifies_with(self, secret: str) -> bool:
        return verify_signature(secret, self.body, self.headers[SIGNATURE_HEADER.lower()])


@dataclass
class WebhookReceiver:
    secret: str
    fail_first: int = 0
    hang: bool = False
    received: list[Received] = field(default_factory=list)
    accepted: list[Received] = field(default_factory=list)
    url: str = ""
    _release: asyncio.Event = field(default_factory=asyncio.Event)

    async def _hook(self, request: Request) -> PlainTextResponse:
        entry = Received(time.monotonic(), dict(request.headers), await request.body())
        self.received.append(entry)
        if self.hang:
            await self._release.wait()  # never answers while the test runs
        if len(self.received) <= self.fail_first:
            return PlainTextResponse("not yet", status_code=500)
        if not entry.verifies_with(self.secret):
            return PlainTextResponse("bad signature", status_code=401)
        self.accepted.append(entry)
        return PlainTextResponse("ok")

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[WebhookReceiver]:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        app = Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        serving = asyncio.create_task(server.serve(sockets=[listener]))

        async def started() -> bool:  # uvicorn offers no start event to wait on
            return server.started

        await wait_until(started)
        self.url = f"http://127.0.0.1:{port}/hook"
        try:
            yield self
        finally:
            self._release.set()
            server.should_exit = True
            await serving
            listener.close()
