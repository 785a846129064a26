"""The runtime instance visibility evaluator: which runtime capacity a tenant may see.

Owns exactly the seed's rules. Shared instance: visible to Shared tenants, and to Hybrid /
Dedicated tenants only when their settings allow shared fallback. Dedicated and Hybrid
instances: visible only when the instance's TenantId or TenantGroupId matches the caller's
snapshot; an unowned Hybrid instance is never visible, whatever the fallback setting.
Also the same rules as help-board scopes (execution assistance): a run asks for help on the
boards of every scope whose instances may serve it, an instance reads only the boards of its
own scope, so an instance reads exactly the requests of the runs it may see.
Must not read the tenant from anywhere but the ExecutionContextSnapshot.
"""

from __future__ import annotations

from runtime_core.assistance import SHARED_SCOPE, group_scope, tenant_scope
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._tenants import IsolationMode, TenantRuntimeSettings


def owner_matches(
    instance_tenant_id: str | None, instance_group_id: str | None, snapshot: ExecutionContextSnapshot
) -> bool:
    if instance_tenant_id and instance_tenant_id == snapshot.tenant_id:
        return True
    return bool(instance_group_id and instance_group_id == snapshot.tenant_group_id)


def shared_capacity_serves(tenant: TenantRuntimeSettings) -> bool:
    """Whether Shared instances may serve the tenant's runs (a Shared tenant, or a fallback)."""
    return tenant.isolation_mode is IsolationMode.SHARED or tenant.allow_shared_fallback


def is_instance_visible(
    instance_mode: IsolationMode,
    instance_tenant_id: str | None,
    instance_group_id: str | None,
    snapshot: ExecutionContextSnapshot,
    tenant: TenantRuntimeSettings,
) -> bool:
    """True when a runtime instance of `instance_mode` and owner may serve this snapshot."""
    if instance_mode is IsolationMode.SHARED:
        return shared_capacity_serves(tenant)
    return owner_matches(instance_tenant_id, instance_group_id, snapshot)


def help_scopes_of_run(snapshot: ExecutionContextSnapshot, tenant: TenantRuntimeSettings) -> list[str]:
    """The help boards a run of this snapshot asks for assistance on: its tenant's and group's
    (for Dedicated / Hybrid instances they own) and the shared one when shared capacity may
    serve it."""
    scopes = [tenant_scope(snapshot.tenant_id)]
    if snapshot.tenant_group_id:
        scopes.append(group_scope(snapshot.tenant_group_id))
    if shared_capacity_serves(tenant):
        scopes.append(SHARED_SCOPE)
    return scopes


def help_scopes_of_instance(
    instance_mode: IsolationMode, instance_tenant_id: str | None, instance_group_id: str | None
) -> list[str]:
    """The help boards an instance reads: the shared one, or its owner's (none when unowned)."""
    if instance_mode is IsolationMode.SHARED:
        return [SHARED_SCOPE]
    scopes = [tenant_scope(instance_tenant_id)] if instance_tenant_id else []
    return scopes + ([group_scope(instance_group_id)] if instance_group_id else [])
