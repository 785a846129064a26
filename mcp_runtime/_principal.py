"""The authenticated caller (a principal) and the snapshot it stamps on every tool call.

Owns the Principal model and the one place that turns it into an ExecutionContextSnapshot.
Must not hold credentials: token hashes stay in the configuration, never on a principal.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runtime_core.identity import ExecutionContextSnapshot


class Principal(BaseModel):
    """Who is calling: a configured identity with its tenant, roles and namespaces."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    user_id: str
    tenant_id: str
    tenant_group_id: str | None = None
    roles: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    current_namespace: str | None = None
    project: str = ""

    def snapshot(self, context_key: str) -> ExecutionContextSnapshot:
        """Capture this principal as the frozen context carried by every hop of one call."""
        return ExecutionContextSnapshot(
            context_key=context_key,
            project=self.project,
            user_id=self.user_id,
            tenant_id=self.tenant_id,
            tenant_group_id=self.tenant_group_id,
            current_namespace=self.current_namespace,
            namespaces=self.namespaces,
            roles=self.roles,
        )
