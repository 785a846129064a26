"""Tenant runtime settings: how much and which kind of runtime capacity a tenant gets.

Owns the settings model (IsolationMode Shared/Dedicated/Hybrid, fallback, instance limits,
instance id prefix, per-instance sizing) and the catalog that resolves a tenant id to its
settings from configuration, falling back to the `default` entry. Must not decide
visibility or admission itself.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel


class IsolationMode(StrEnum):
    SHARED = "Shared"
    DEDICATED = "Dedicated"
    HYBRID = "Hybrid"


class TenantRuntimeSettings(BaseModel):
    """Runtime capacity settings of one tenant (camelCase in configuration files)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, alias_generator=to_camel, extra="forbid")

    tenant_id: str = "default"
    isolation_mode: IsolationMode = IsolationMode.SHARED
    prefer_dedicated_capacity: bool = False
    allow_shared_fallback: bool = True
    max_runtime_instances: int = Field(default=1, ge=0)
    runtime_instance_id_prefix: str = "runtime-instance"
    worker_count_per_instance: int = Field(default=10, ge=1)
    max_concurrent_runs_per_instance: int = Field(default=3, ge=1)
    local_queue_capacity: int = Field(default=100, ge=1)
    max_local_workers_per_execution: int | None = Field(default=None, ge=1)


DEFAULT_TENANT_KEY = "default"
_TENANTS = TypeAdapter(dict[str, TenantRuntimeSettings])


class TenantSettingsCatalog:
    """Resolves `ExecutionContextSnapshot.tenant_id` to settings; unknown tenants get `default`."""

    def __init__(self, tenants: dict[str, TenantRuntimeSettings] | None = None) -> None:
        self._tenants = dict(tenants or {})
        self._default = self._tenants.pop(DEFAULT_TENANT_KEY, TenantRuntimeSettings())

    @classmethod
    def from_mapping(cls, raw: dict[str, dict[str, object]]) -> TenantSettingsCatalog:
        """`{"<tenant id>" | "default": {...camelCase settings...}}` (the tenants file's `tenants`
        section); a ValidationError locates a problem by tenant id and setting."""
        with_ids = {tenant_id: {"tenantId": tenant_id, **values} for tenant_id, values in raw.items()}
        return cls(_TENANTS.validate_python(with_ids))

    def resolve(self, tenant_id: str) -> TenantRuntimeSettings:
        settings = self._tenants.get(tenant_id)
        if settings is not None:
            return settings
        return self._default.model_copy(update={"tenant_id": tenant_id})
