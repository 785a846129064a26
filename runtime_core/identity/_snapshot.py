"""The ExecutionContextSnapshot: who asked, for which tenant, captured once per call."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field


class ExecutionContextSnapshot(BaseModel):
    """Frozen caller context carried by every asynchronous hop.

    `tenant_id` here is the only durable tenant boundary in the runtime.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    context_key: str = ""
    project: str = ""
    user_id: str
    tenant_id: str
    tenant_group_id: str | None = None
    current_namespace: str | None = None
    namespaces: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    captured_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, raw: str | bytes) -> ExecutionContextSnapshot:
        return cls.model_validate_json(raw)
