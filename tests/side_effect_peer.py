"""A loopback HTTP peer with side effects, for the tests of `tool.http` operations.

`POST /effects` applies one effect per request (counted by its `Idempotency-Key`); `POST
/effects/idempotent` applies it once per key and answers a repeat with the first result; `GET
/effects/{key}` answers the effect a key made (404: none), the status endpoint `reconcile`
asks. While `hold` is set, a request applies its effect and then waits until `release()`
(the caller's process can be killed meanwhile: the effect took place, the answer never came).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class SideEffectPeer:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()  # requests per key, whatever they did
        self.effects: Counter[str] = Counter()  # effects applied per key
        self.results: dict[str, dict[str, Any]] = {}
        self.hold = False
        self.held = asyncio.Event()  # a request is being held
        self._released = asyncio.Event()

    def release(self) -> None:
        self._released.set()

    @property
    def total_effects(self) -> int:
        return sum(self.effects.values())

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/effects", self._plain, methods=["POST"]),
                Route("/effects/idempotent", self._idempotent, methods=["POST"]),
                Route("/effects/{key}", self._status, methods=["GET"]),
            ]
        )

    async def _plain(self, request: Request) -> JSONResponse:
        return await self._apply(request, dedupe=False)

    async def _idempotent(self, request: Request) -> JSONResponse:
        return await self._apply(request, dedupe=True)

    async def _apply(self, request: Request, *, dedupe: bool) -> JSONResponse:
        key = request.headers.get("idempotency-key", "")
        body = await request.json()
        self.calls[key] += 1
        if dedupe and key in self.results:
            return JSONResponse(self.results[key])
        self.effects[key] += 1
        result = {"effect": self.total_effects, "key": key, "body": body}
        self.results[key] = result
        if self.hold:
            self.held.set()
            await self._released.wait()
        return JSONResponse(result)

    async def _status(self, request: Request) -> JSONResponse:
        key = request.path_params["key"]
        if key not in self.results:
            return JSONResponse({"error": "unknown operation"}, status_code=404)
        return JSONResponse(self.results[key])
