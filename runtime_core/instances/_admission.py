"""The admission controller: decide WHO receives a run, or what to do when nobody can.

Owns the decision (AssignToInstance with ordered candidates, QueueGlobally,
RequestScaleOut, Reject) from the restored snapshot's tenant settings and the
tenant-visible registry. Must not reserve, dispatch or change any run state.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum

from pydantic import BaseModel, Field

from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._models import InstanceEntry
from runtime_core.instances._registry import InstanceRegistry
from runtime_core.instances._tenants import IsolationMode, TenantRuntimeSettings
from runtime_core.instances._visibility import owner_matches


class AdmissionKind(StrEnum):
    ASSIGN_TO_INSTANCE = "AssignToInstance"
    QUEUE_GLOBALLY = "QueueGlobally"
    REQUEST_SCALE_OUT = "RequestScaleOut"
    REJECT = "Reject"


class AdmissionCandidate(BaseModel):
    """A tenant-visible instance that can accept the run, and the provider that reaches it."""

    runtime_instance_id: str
    provider_name: str


class AdmissionDecision(BaseModel):
    kind: AdmissionKind
    reason: str
    candidates: list[AdmissionCandidate] = Field(default_factory=list)
    tenant_settings: TenantRuntimeSettings

    @property
    def runtime_instance_id(self) -> str | None:
        return self.candidates[0].runtime_instance_id if self.candidates else None


def admission_group(snapshot: ExecutionContextSnapshot) -> str:
    """Everything admission reads from a snapshot: runs of one group get the same decision.

    Tenant settings come from the tenant id, visibility and ranking from the tenant id and
    tenant group id; roles, user and namespaces never change who may receive a run.
    """
    return json.dumps([snapshot.tenant_id, snapshot.tenant_group_id or ""])


def admission_group_tenant(group: str | None) -> str | None:
    """The tenant id inside an `admission_group` value (None for an empty or foreign value)."""
    try:
        tenant_id = json.loads(group or "null")[0]
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    return tenant_id if isinstance(tenant_id, str) else None


class AdmissionController:
    """Admission under the snapshot's tenant: only tenant-visible, live capacity counts."""

    def __init__(
        self,
        registry: InstanceRegistry,
        *,
        scale_out_enabled: bool = True,
        reachable: Callable[[str, str], bool] | None = None,
    ) -> None:
        """`reachable(provider_name, runtime_instance_id)`: whether this process can deliver to
        an instance (several control planes each host their own in-process instances); an
        unreachable instance still counts as existing capacity, never as a candidate."""
        self.registry = registry
        self.scale_out_enabled = scale_out_enabled
        self.reachable = reachable

    async def admit(
        self, snapshot: ExecutionContextSnapshot, entries: list[InstanceEntry] | None = None
    ) -> AdmissionDecision:
        """Decide from `entries` (a registry listing read earlier in a pump cycle) or a fresh read.

        A listing read earlier may show slots that are gone by now; the Lua reservation the
        delivery takes next re-checks the published capacity, so it can never over-commit.
        """
        tenant = self.registry.tenants.resolve(snapshot.tenant_id)
        listing = await self.registry.entries() if entries is None else entries
        visible = [e for e in listing if e.live and self.registry.is_visible(e, snapshot)]
        reachable = (e for e in visible if e.eligible and self._reaches(e))
        eligible = sorted(reachable, key=lambda e: self._rank(e, snapshot, tenant))
        if eligible:
            return AdmissionDecision(
                kind=AdmissionKind.ASSIGN_TO_INSTANCE,
                reason=f"{len(eligible)} tenant-visible runtime instance(s) can accept the run",
                candidates=[
                    AdmissionCandidate(
                        runtime_instance_id=e.runtime_instance_id, provider_name=e.descriptor.provider_name
                    )
                    for e in eligible
                ],
                tenant_settings=tenant,
            )
        return self._without_capacity(visible, tenant)

    def may_assign(self, entries: list[InstanceEntry]) -> bool:
        """Whether `admit` could assign any run to an instance from `entries`: a live instance
        this process reaches has a free run slot. False: every admission from this listing is
        AssignToInstance for no tenant."""
        return any(e.live and e.eligible and self._reaches(e) for e in entries)

    def _reaches(self, entry: InstanceEntry) -> bool:
        if self.reachable is None:
            return True
        return self.reachable(entry.descriptor.provider_name, entry.runtime_instance_id)

    @staticmethod
    def _rank(
        entry: InstanceEntry, snapshot: ExecutionContextSnapshot, tenant: TenantRuntimeSettings
    ) -> tuple[int, int, int, str]:
        d = entry.descriptor
        owned = d.isolation_mode is not IsolationMode.SHARED and owner_matches(
            d.tenant_id, d.tenant_group_id, snapshot
        )
        preference = 0 if owned or not tenant.prefer_dedicated_capacity else 1
        return (preference, -entry.free_slots, -entry.capacity.available_workers, entry.runtime_instance_id)

    def _without_capacity(
        self, visible: list[InstanceEntry], tenant: TenantRuntimeSettings
    ) -> AdmissionDecision:
        own = [
            e for e in visible if e.descriptor.runtime_instance_id_prefix == tenant.runtime_instance_id_prefix
        ]
        if self.scale_out_enabled and len(own) < tenant.max_runtime_instances:
            kind, reason = (
                AdmissionKind.REQUEST_SCALE_OUT,
                f"no tenant-visible capacity; {len(own)} of {tenant.max_runtime_instances} "
                f"'{tenant.runtime_instance_id_prefix}' instances exist",
            )
        elif visible:
            kind, reason = AdmissionKind.QUEUE_GLOBALLY, "tenant-visible runtime instances are busy"
        else:
            kind, reason = (
                AdmissionKind.REJECT,
                "no tenant-visible runtime capacity and no scale-out is possible for this tenant",
            )
        return AdmissionDecision(kind=kind, reason=reason, tenant_settings=tenant)
