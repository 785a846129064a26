"""Models of a runtime instance as other parts see it.

Owns the per-instance configuration (`RuntimeInstanceSettings`), the registry descriptor,
the capacity descriptor with every field of seed 001's list, the joined registry entry,
and the local run request / view / queue state. Must not hold behaviour beyond derived
fields.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.assistance import AssistanceSettings
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances._tenants import IsolationMode, TenantRuntimeSettings
from runtime_core.pipeline import PipelineDefinition

PROVIDER_NAME_KEY = "provider.name"
TRANSPORT_NAME_KEY = "transport.name"
TRANSPORT_ENDPOINT_KEY = "transport.endpoint"
# Run attribute naming one dispatch attempt of a shared run (a fresh id per provider call).
DISPATCH_ATTEMPT_KEY = "dispatch.attempt.id"
# Run attribute naming the incarnation a dispatch reserved capacity of: another incarnation
# of the same instance id refuses it.
TARGET_INCARNATION_KEY = "runtime.instance.incarnation"
# Reason code (failure_reason prefix) of a run whose hot state Redis lost and that had no
# durable copy to be restored from.
HOT_STATE_LOST = "hot_state_lost"


class RuntimeInstanceSettings(BaseModel):
    """One typed config object per runtime instance (sizes, tenant ownership, transport).

    `metadata` adds registry metadata (e.g. the control-plane id and host id of a
    runtime-instance process); the provider keys always come from the transport fields.
    `assistance`: whether (and how) its idle workers assist other instances' wide executions
    and its own wide runs ask for that help.
    """

    model_config = ConfigDict(frozen=True)

    runtime_instance_id: str
    role: str = "Runtime"
    host: str = "localhost"
    worker_count: int = Field(default=4, ge=1)
    max_local_workers_per_execution: int = Field(default=4, ge=1)
    max_concurrent_runs: int = Field(default=3, ge=1)
    local_queue_capacity: int = Field(default=100, ge=1)
    isolation_mode: IsolationMode = IsolationMode.SHARED
    tenant_id: str | None = None
    tenant_group_id: str | None = None
    prefer_dedicated_capacity: bool = False
    allow_shared_fallback: bool = True
    runtime_instance_id_prefix: str = "runtime-instance"
    heartbeat_interval_ms: int = Field(default=2_000, ge=10)
    provider_name: str = "local"
    transport_name: str = "in-memory"
    transport_endpoint: str = ""
    metadata: dict[str, str] = Field(default_factory=dict)
    assistance: AssistanceSettings = Field(default_factory=AssistanceSettings)

    @property
    def workers_per_execution(self) -> int:
        """The most engine workers one execution gets here, one of its own runs or one it assists."""
        return min(self.worker_count, self.max_local_workers_per_execution)

    @classmethod
    def for_tenant(
        cls,
        runtime_instance_id: str,
        tenant: TenantRuntimeSettings,
        snapshot: ExecutionContextSnapshot,
        **overrides: Any,
    ) -> RuntimeInstanceSettings:
        """Size and own a scaled-out instance from the tenant's settings (owner only if not Shared)."""
        owned = tenant.isolation_mode is not IsolationMode.SHARED
        workers = tenant.worker_count_per_instance
        values: dict[str, Any] = {
            "runtime_instance_id": runtime_instance_id,
            "worker_count": workers,
            "max_local_workers_per_execution": tenant.max_local_workers_per_execution or workers,
            "max_concurrent_runs": tenant.max_concurrent_runs_per_instance,
            "local_queue_capacity": tenant.local_queue_capacity,
            "isolation_mode": tenant.isolation_mode,
            "tenant_id": snapshot.tenant_id if owned else None,
            "tenant_group_id": snapshot.tenant_group_id if owned else None,
            "prefer_dedicated_capacity": tenant.prefer_dedicated_capacity,
            "allow_shared_fallback": tenant.allow_shared_fallback,
            "runtime_instance_id_prefix": tenant.runtime_instance_id_prefix,
        }
        return cls(**{**values, **overrides})


class InstanceDescriptor(BaseModel):
    """Registry entry: identity, role, tenant ownership and provider metadata of an instance.

    `incarnation` names one start of the process hosting the instance: the id names capacity,
    the incarnation names who holds the registration now.
    """

    runtime_instance_id: str
    incarnation: str = ""
    role: str
    status: str
    host: str
    isolation_mode: IsolationMode
    tenant_id: str | None
    tenant_group_id: str | None
    prefer_dedicated_capacity: bool
    allow_shared_fallback: bool
    runtime_instance_id_prefix: str
    metadata: dict[str, str] = Field(default_factory=dict)

    @property
    def provider_name(self) -> str:
        return self.metadata.get(PROVIDER_NAME_KEY, "")

    @property
    def provider_endpoint(self) -> str:
        return self.metadata.get(TRANSPORT_ENDPOINT_KEY, "")


class CapacityDescriptor(BaseModel):
    """What an instance can take right now; `can_accept_run` combines state, queue room and a run slot."""

    runtime_instance_id: str
    incarnation: str = ""
    worker_count: int
    active_workers: int
    available_workers: int
    max_local_workers_per_execution: int
    queued: int
    running: int
    active_runs: int
    queue_capacity: int
    max_concurrent_runs: int
    available_run_slots: int
    queue_paused: bool
    can_accept_run: bool
    # Of `running`: runs parked waiting for human input, and paused runs (a slot, no worker).
    waiting_for_input: int = 0
    paused_runs: int = 0
    snapshot_at_ms: int = 0
    tenant_id: str | None = None
    tenant_group_id: str | None = None
    isolation_mode: IsolationMode = IsolationMode.SHARED
    prefer_dedicated_capacity: bool = False
    allow_shared_fallback: bool = True
    runtime_instance_id_prefix: str = ""
    provider_name: str = ""
    transport_name: str = ""
    provider_endpoint: str = ""
    assistance_workers: int = Field(
        0,
        description="What it offers as an assistance candidate: its effective worker count for "
        "another instance's execution, min(worker_count, max_local_workers_per_execution, "
        "available_workers); 0 when assistance is off or it takes no work.",
    )
    assisting_executions: int = Field(0, description="Other instances' executions it assists now.")
    assisting_workers: int = Field(0, description="Its workers assisting them.")


class InstanceHealth(StrEnum):
    """Set by the health reconciler in the registry record; only Healthy instances are live."""

    HEALTHY = "Healthy"
    UNSAFE = "Unsafe"
    RECOVERED = "Recovered"


class InstanceEntry(BaseModel):
    """Registry descriptor joined with its capacity, liveness, health and held reservations."""

    descriptor: InstanceDescriptor
    capacity: CapacityDescriptor
    registered_at_ms: int
    heartbeat_at_ms: int
    live: bool
    reserved_slots: int = 0
    health: InstanceHealth = InstanceHealth.HEALTHY

    @property
    def runtime_instance_id(self) -> str:
        return self.descriptor.runtime_instance_id

    @property
    def free_slots(self) -> int:
        return max(0, self.capacity.available_run_slots - self.reserved_slots)

    @property
    def eligible(self) -> bool:
        return self.live and self.capacity.can_accept_run and self.free_slots > 0


class LocalRunStatus(StrEnum):
    QUEUED = "Queued"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (LocalRunStatus.COMPLETED, LocalRunStatus.FAILED, LocalRunStatus.CANCELLED)


class LocalRunRequest(BaseModel):
    """A run delivered into one instance's local queue; refused without a snapshot.

    `resume_execution_id` (recovery of an in-flight execution) makes the run continue that
    existing ExecutionId instead of creating a new execution.
    """

    model_config = ConfigDict(frozen=True)

    pipeline: PipelineDefinition
    input: dict[str, Any] = Field(default_factory=dict)
    snapshot: ExecutionContextSnapshot | None
    shared_run_id: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    resume_execution_id: str | None = None

    @property
    def dispatch_attempt_id(self) -> str | None:
        """The shared-run dispatch attempt this request is (None outside shared-run dispatch)."""
        return self.attributes.get(DISPATCH_ATTEMPT_KEY) if self.shared_run_id else None

    @property
    def target_incarnation(self) -> str | None:
        """The incarnation whose capacity the dispatcher reserved (None: any incarnation)."""
        return self.attributes.get(TARGET_INCARNATION_KEY) or None


class LocalRunView(BaseModel):
    """One local run (RunId) of one instance: its lifecycle, never its tenant context."""

    local_run_id: str
    shared_run_id: str | None
    runtime_instance_id: str
    status: LocalRunStatus
    execution_id: str | None = None
    effective_workers: int = 0
    failure_reason: str | None = None
    created_at_ms: int = 0
    started_at_ms: int | None = None
    completed_at_ms: int | None = None


class QueueStateView(BaseModel):
    """Local queue control state of one instance."""

    runtime_instance_id: str
    paused: bool
    reason: str | None = None
    requested_by: str | None = None
    queued: int
    running: int
