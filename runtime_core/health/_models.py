"""The health report: an overall status and one named result per check (the JSON body)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class HealthStatus(StrEnum):
    ALIVE = "alive"
    READY = "ready"
    NOT_READY = "not_ready"


class CheckResult(BaseModel):
    ok: bool
    detail: str = Field(description="What was checked and found, or why it failed.")
    duration_ms: float


class HealthReport(BaseModel):
    status: HealthStatus
    checks: dict[str, CheckResult] = Field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        return self.status is not HealthStatus.NOT_READY
