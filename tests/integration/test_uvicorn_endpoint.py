"""The HTTP endpoint every server of the runtime uses (MCP server, runtime-instance processes).

Its listening socket is bound before serving and declared TCP, so asyncio sets TCP_NODELAY on
each accepted connection: without it, every keep-alive request after a connection's first
waited ~40 ms for the client's delayed ACK (the cause of ~100 ms MCP calls over HTTP).
"""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from runtime_core.hosting import UvicornEndpoint


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"path": request.url.path})


async def _keep_alive_requests(port: int, count: int) -> list[bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = []
    try:
        for n in range(count):
            writer.write(f"GET /echo{n} HTTP/1.1\r\nHost: local\r\n\r\n".encode())
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(
                next(
                    line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
                ).split(b":")[1]
            )
            answers.append(await reader.readexactly(length))
    finally:
        writer.close()
        await writer.wait_closed()
    return answers


async def test_connections_are_accepted_with_no_delay_and_serve_keep_alive_requests() -> None:
    app = Starlette(routes=[Route("/echo{n}", _echo)])
    endpoint = UvicornEndpoint(app, "127.0.0.1", 0, lifespan="off")
    await endpoint.start()
    try:
        assert endpoint.no_delay
        answers = await _keep_alive_requests(endpoint.port, 3)
        assert answers == [f'{{"path":"/echo{n}"}}'.encode() for n in range(3)]
    finally:
        await endpoint.stop()
