"""SchedulingSettings: whether this control plane runs a scheduler, and its cadence."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field


class SchedulingSettings(BaseModel):
    """`misfire_grace_ms`: a tick first seen later than this after its time was missed (the
    catch-up policy decides about it); `poll_interval_ms`: the longest a scheduler waits before
    looking for schedules other control planes created; `claim_lease_ms`: how long a claimed
    tick is its scheduler's before another may fire it (same idempotency key)."""

    enabled: bool = True
    poll_interval_ms: int = Field(default=1_000, ge=10)
    misfire_grace_ms: int = Field(default=60_000, ge=0)
    claim_lease_ms: int = Field(default=30_000, ge=100)

    @classmethod
    def from_env(cls) -> SchedulingSettings:
        env = {
            "enabled": os.environ.get("MCP_RUNTIME_SCHEDULER"),
            "poll_interval_ms": os.environ.get("MCP_RUNTIME_SCHEDULER_POLL_MS"),
            "misfire_grace_ms": os.environ.get("MCP_RUNTIME_SCHEDULE_MISFIRE_GRACE_MS"),
            "claim_lease_ms": os.environ.get("MCP_RUNTIME_SCHEDULE_CLAIM_LEASE_MS"),
        }
        return cls.model_validate({key: value for key, value in env.items() if value})
