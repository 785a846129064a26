"""The ExecutionContextSnapshot: who asked, for which tenant, captured once per call."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field


class ExecutionContextSnapshot(BaseModel):
    """Frozen caller context carried by every asynchronous hop.

    `tenant_id` here is the only durable tenant boundary in the runtime. `attributes` are
    facts about why the run exists that travel with it (a scheduled run's `schedule.id` and
    `schedule.tick`; a retried run's `retry.of`), never credentials.
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
    attributes: dict[str, str] = Field(default_factory=dict)
    # How the caller authenticated (`configured`, `static_token`, `oauth`, `session`), and for a
    # token the issuer, subject and token id (`jti`) it carried: never the token itself.
    auth_method: str | None = None
    auth_issuer: str | None = None
    auth_subject: str | None = None
    auth_jti: str | None = None
    captured_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, raw: str | bytes) -> ExecutionContextSnapshot:
        return cls.model_validate_json(raw)
