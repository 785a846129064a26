"""Readiness of running processes, asked from outside: what `mcp-runtime wait-ready` does.

Owns the probe of one target (an HTTP process: `GET /readyz` answers 200; a gRPC runtime-instance
process: `grpc.health.v1.Health/Check` of service "" answers SERVING) and the bounded wait until
every target is ready. Must not decide readiness (each process does, see `HealthService`) and
never waits without a deadline.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

READINESS_PATH = "/readyz"
PROBE_SCHEMES = ("http", "https", "grpc")


@dataclass(frozen=True)
class ProbeTarget:
    """`http://host:port[/path]` (the path defaults to /readyz) or `grpc://host:port`."""

    text: str
    scheme: str
    address: str  # host:port
    path: str

    @classmethod
    def parse(cls, text: str) -> ProbeTarget:
        parts = urlsplit(text)
        if parts.scheme not in PROBE_SCHEMES or not parts.hostname or parts.port is None:
            raise ValueError(
                f"{text!r} is not a probe target: give http://HOST:PORT (GET /readyz of `serve` or an "
                "HTTP runtime-instance process) or grpc://HOST:PORT (a gRPC runtime-instance process)"
            )
        return cls(text, parts.scheme, parts.netloc, parts.path or READINESS_PATH)

    async def probe(self, timeout_s: float) -> str | None:
        """None when the target is ready, else why not (one line)."""
        if self.scheme == "grpc":
            return await _probe_grpc(self.address, timeout_s)
        return await _probe_http(f"{self.scheme}://{self.address}{self.path}", timeout_s)


async def _probe_http(url: str, timeout_s: float) -> str | None:
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.get(url)
    except httpx.HTTPError as exc:
        return f"not answering ({type(exc).__name__})"
    if response.status_code == 200:
        return None
    return f"HTTP {response.status_code}: {response.text[:300]}"


async def _probe_grpc(address: str, timeout_s: float) -> str | None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            return f"not answering ({exc.code().name})"
    if reply.status == health_pb2.HealthCheckResponse.SERVING:
        return None
    return f"health status {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"


async def wait_ready(
    targets: list[ProbeTarget], timeout_s: float, *, interval_s: float = 0.5, probe_timeout_s: float = 2.0
) -> dict[str, str]:
    """Probe every target until all are ready or `timeout_s` passed; {target: why not} of those
    still not ready (empty when all are)."""
    deadline = time.monotonic() + timeout_s
    waiting = {target.text: target for target in targets}
    reasons: dict[str, str] = {}
    while True:
        answers = await asyncio.gather(*(t.probe(probe_timeout_s) for t in waiting.values()))
        reasons = {text: reason for text, reason in zip(waiting, answers, strict=True) if reason is not None}
        waiting = {text: waiting[text] for text in reasons}
        if not waiting or time.monotonic() + interval_s > deadline:
            return reasons
        await asyncio.sleep(interval_s)
