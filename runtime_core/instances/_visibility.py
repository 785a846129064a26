"""The runtime instance visibility evaluator: which runtime capacity a tenant may see.

Owns exactly the seed's rules. Shared instance: visible to Shared tenants, and to Hybrid /
Dedicated tenants only when their settings allow shared fallback. Dedicated and Hybrid
instances: visible only when the instance's TenantId or TenantGroupId matches the caller's
snapshot; an unowned Hybrid instance is never visible, whatever the fallback setting.
Must not read the tenant from anywhere but the ExecutionContextSnapshot.
"""

from __future__ import annotations

from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._tenants import IsolationMode, TenantRuntimeSettings


def owner_matches(
    instance_tenant_id: str | None, instance_group_id: str | None, snapshot: ExecutionContextSnapshot
) -> bool:
    if instance_tenant_id and instance_tenant_id == snapshot.tenant_id:
        return True
    return bool(instance_group_id and instance_group_id == snapshot.tenant_group_id)


def is_instance_visible(
    instance_mode: IsolationMode,
    instance_tenant_id: str | None,
    instance_group_id: str | None,
    snapshot: ExecutionContextSnapshot,
    tenant: TenantRuntimeSettings,
) -> bool:
    """True when a runtime instance of `instance_mode` and owner may serve this snapshot."""
    if instance_mode is IsolationMode.SHARED:
        return tenant.isolation_mode is IsolationMode.SHARED or tenant.allow_shared_fallback
    return owner_matches(instance_tenant_id, instance_group_id, snapshot)
