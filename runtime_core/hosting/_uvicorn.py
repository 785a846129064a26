"""UvicornEndpoint: an ASGI app served by uvicorn on a socket this process bound first.

Owns binding the listening socket before serving (so a taken port is a typed error from
`start()`, and whoever logs "serving on ..." after `start()` is telling the truth), waiting
until uvicorn has started (its lifespan included), and stopping it. Signals stay with the
process (uvicorn's own handlers are disabled). Must not know what the app serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Literal

import uvicorn
from starlette.types import ASGIApp

from runtime_core.errors import RuntimeCoreError

_STARTED_POLL_S = 0.01


class EndpointBindError(RuntimeCoreError):
    """The address to listen on cannot be bound (port taken, address not local, no permission)."""

    code = "address_unavailable"


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """The process handles SIGTERM / SIGINT itself (it closes its services before exiting)."""
        yield


class UvicornEndpoint:
    def __init__(
        self, app: ASGIApp, host: str, port: int, *, lifespan: Literal["on", "off", "auto"] = "auto"
    ) -> None:
        self.host = host
        self.port = port
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan=lifespan)
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def task(self) -> asyncio.Task[None]:
        """Ends when the server stops (after `stop()`, or when it fails)."""
        assert self._task is not None, "start() first"
        return self._task

    @property
    def no_delay(self) -> bool:
        """Whether connections accepted from now on send small writes at once (TCP_NODELAY:
        asyncio sets it on every connection accepted from a listening socket declared TCP)."""
        return any(
            sock.proto == socket.IPPROTO_TCP for server in self._server.servers for sock in server.sockets
        )

    async def start(self) -> None:
        """Bind, then serve; returns once uvicorn has started. `port` 0 binds a free port."""
        sock = self._bind()
        self.port = sock.getsockname()[1]
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name=f"http:{self.port}")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError(f"the HTTP server on {self.host}:{self.port} stopped while starting")
            await asyncio.sleep(_STARTED_POLL_S)  # uvicorn exposes no started event

    def _bind(self) -> socket.socket:
        # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only for
        # sockets that say they are TCP. Without it a keep-alive response written in two parts
        # waits for the client's delayed ACK: 40 ms on every request after a connection's first.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise EndpointBindError(
                f"Cannot listen on {self.host}:{self.port}: {exc.strerror or exc}.",
                hint="Pick a free port (--port) or a local address (--host).",
            ) from exc
        return sock

    async def stop(self) -> None:
        if self._task is None:
            return
        self._server.should_exit = True
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
