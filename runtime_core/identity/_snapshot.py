"""The ExecutionContextSnapshot: who asked, for which tenant, captured once per call.

Owns the snapshot model and the snapshot of a child run (a run a step of another run starts:
the same principal, its attributes naming the parent call, which is how the link survives
wherever the snapshot is kept: the shared run, the run index, the archived run record).
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

PARENT_EXECUTION_ATTRIBUTE = "parent.execution.id"
PARENT_STEP_ATTRIBUTE = "parent.step"
PARENT_CALL_ATTRIBUTE = "parent.call"


class ExecutionContextSnapshot(BaseModel):
    """Frozen caller context carried by every asynchronous hop.

    `tenant_id` here is the only durable tenant boundary in the runtime. `attributes` are
    facts about why the run exists that travel with it (a scheduled run's `schedule.id` and
    `schedule.tick`; a retried run's `retry.of`; a child run's `parent.call`), never credentials.
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

    def for_child(self, execution_id: str, step_name: str, call: str) -> ExecutionContextSnapshot:
        """The snapshot of a run that step `step_name` of execution `execution_id` starts as its
        call `call`: this principal and tenant, its attributes naming the parent (in place of
        why the parent exists)."""
        attributes = {
            PARENT_EXECUTION_ATTRIBUTE: execution_id,
            PARENT_STEP_ATTRIBUTE: step_name,
            PARENT_CALL_ATTRIBUTE: call,
        }
        return self.model_copy(update={"attributes": attributes})

    @property
    def parent_call(self) -> str | None:
        """The call of another run that started this one (`for_child`), if any."""
        return self.attributes.get(PARENT_CALL_ATTRIBUTE)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, raw: str | bytes) -> ExecutionContextSnapshot:
        return cls.model_validate_json(raw)
