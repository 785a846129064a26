"""The answers of `instances.list` and `capacity.list`: the runtime instances a caller may see,
and a tenant's view of its capacity.

Owns those output models (kept apart from `_outputs`, the other tools' answers; snapshot-tested
with them in tests/unit/mcp_tool_schemas.json). Must not hold behaviour.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from mcp_runtime._outputs import ToolOutput


class RuntimeInstanceInfo(ToolOutput):
    runtime_instance_id: str
    role: str
    status: str = Field(description="Registry status; Stale once heartbeats lapse.")
    live: bool
    worker_count: int
    active_worker_count: int
    available_worker_count: int
    max_local_workers_per_execution: int
    queued_run_count: int
    running_run_count: int
    active_run_count: int
    queue_capacity: int
    max_concurrent_runs: int
    available_run_slots: int
    reserved_run_slots: int
    is_queue_paused: bool
    can_accept_run: bool = Field(description="Queue not paused + queue room + run slot + worker available.")
    registered_at: datetime
    last_heartbeat_at: datetime
    tenant_id: str | None
    tenant_group_id: str | None
    isolation_mode: str = Field(description="Shared, Dedicated or Hybrid.")
    prefer_dedicated_capacity: bool
    allow_shared_fallback: bool
    runtime_instance_id_prefix: str
    provider_name: str
    transport_name: str
    provider_endpoint: str
    assistance_worker_count: int = Field(
        description="Execution assistance: the effective worker count it offers to another instance's "
        "execution, min(worker_count, max_local_workers_per_execution, available_worker_count); 0 when "
        "assistance is off or it takes no work."
    )
    assisting_execution_count: int = Field(description="Other instances' executions it assists now.")
    assisting_worker_count: int = Field(description="Its workers assisting them now.")


class InstancesListOutput(ToolOutput):
    tenant_id: str = Field(description="Instances listed are those visible to this tenant.")
    instances: list[RuntimeInstanceInfo]


class TenantCapacityInfo(ToolOutput):
    runtime_instance_id: str
    status: str = Field(description="Registry status; Stale once heartbeats lapse.")
    live: bool
    isolation_mode: str = Field(description="Shared, Dedicated or Hybrid.")
    dedicated_to_tenant: bool = Field(
        description="The instance serves your tenant alone: only then are its activity figures shown."
    )
    worker_count: int
    max_concurrent_runs: int
    queue_capacity: int
    is_queue_paused: bool
    last_heartbeat_at: datetime
    provider_name: str
    transport_name: str
    active_worker_count: int | None = Field(description="None on capacity shared with other tenants.")
    queued_run_count: int | None = Field(description="None on capacity shared with other tenants.")
    running_run_count: int | None = Field(description="None on capacity shared with other tenants.")
    available_run_slots: int | None = Field(description="None on capacity shared with other tenants.")
    can_accept_run: bool | None = Field(description="None on capacity shared with other tenants.")


class CapacityListOutput(ToolOutput):
    tenant_id: str = Field(description="The capacity listed is the capacity visible to this tenant.")
    instances: list[TenantCapacityInfo]
