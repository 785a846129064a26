"""The control-plane discovery store: how runtime-only hosts learn which control plane they serve.

Owns the one Redis record a control plane publishes on start (`control_plane_id`, its
Redis key prefix, host, pid, publication time from Redis) and withdraws on stop, and the
bounded wait a runtime-instance process performs to resolve it before registering. Must
not register instances itself; shutdown never re-resolves it (hosts keep what they
resolved at start).
"""

from __future__ import annotations

import asyncio
import os
import time

from pydantic import BaseModel

from runtime_core.errors import NotFoundError
from runtime_core.hot_state import HotState


class ControlPlaneDescriptor(BaseModel):
    control_plane_id: str
    redis_prefix: str
    host: str
    pid: int = 0
    published_at_ms: int = 0


class ControlPlaneDiscovery:
    """`{prefix}control-plane:discovery` holds the current control plane's descriptor (JSON)."""

    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self.key = hot_state.key("control-plane", "discovery")

    async def publish(self, control_plane_id: str, host: str) -> ControlPlaneDescriptor:
        descriptor = ControlPlaneDescriptor(
            control_plane_id=control_plane_id,
            redis_prefix=self.hot_state.prefix,
            host=host,
            pid=os.getpid(),
            published_at_ms=await self.hot_state.server_time_ms(),
        )
        await self.hot_state.redis.set(self.key, descriptor.model_dump_json())
        return descriptor

    async def read(self) -> ControlPlaneDescriptor | None:
        raw = await self.hot_state.redis.get(self.key)
        return ControlPlaneDescriptor.model_validate_json(raw) if raw else None

    async def withdraw(self, control_plane_id: str) -> None:
        """Remove the record if it is still this control plane's (a successor's stays)."""
        current = await self.read()
        if current is not None and current.control_plane_id == control_plane_id:
            await self.hot_state.redis.delete(self.key)

    async def resolve(self, *, timeout_s: float, poll_interval_s: float = 0.1) -> ControlPlaneDescriptor:
        """The published descriptor; NotFoundError when none appears within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while (descriptor := await self.read()) is None:
            if time.monotonic() >= deadline:
                raise NotFoundError(
                    f"No control plane published a discovery record under Redis prefix "
                    f"'{self.hot_state.prefix}' within {timeout_s:g}s.",
                    hint="Start the control plane first (mcp-runtime serve), or check --redis-url "
                    "and --redis-prefix.",
                )
            await asyncio.sleep(poll_interval_s)  # waiting for another process to publish
        return descriptor
