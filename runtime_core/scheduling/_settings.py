"""SchedulingSettings: whether this control plane runs a scheduler, and its cadence."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field


class SchedulingSettings(BaseModel):
    """`misfire_grace_ms`: a tick first seen later than this after its time was missed (the
    catch-up policy decides about it); `poll_interval_ms`: the longest a scheduler waits before
    looking for due ticks and schedules other control planes changed; `refresh_interval_ms`: the
    longest a scheduler keeps its copy of the active schedules without reading the durable
    store (a create / pause / resume / delete makes every scheduler read it at its next pass);
    `claim_lease_ms`: how long a claimed tick is its scheduler's before another may fire it
    (same idempotency key)."""

    enabled: bool = True
    poll_interval_ms: int = Field(default=1_000, ge=10)
    refresh_interval_ms: int = Field(default=60_000, ge=100)
    misfire_grace_ms: int = Field(default=60_000, ge=0)
    claim_lease_ms: int = Field(default=30_000, ge=100)

    @classmethod
    def from_env(cls) -> SchedulingSettings:
        env = {
            "enabled": os.environ.get("MCP_RUNTIME_SCHEDULER"),
            "poll_interval_ms": os.environ.get("MCP_RUNTIME_SCHEDULER_POLL_MS"),
            "refresh_interval_ms": os.environ.get("MCP_RUNTIME_SCHEDULER_REFRESH_MS"),
            "misfire_grace_ms": os.environ.get("MCP_RUNTIME_SCHEDULE_MISFIRE_GRACE_MS"),
            "claim_lease_ms": os.environ.get("MCP_RUNTIME_SCHEDULE_CLAIM_LEASE_MS"),
        }
        return cls.model_validate({key: value for key, value in env.items() if value})
