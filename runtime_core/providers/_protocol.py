"""The transport-neutral runtime provider contract.

Owns the request / response models (pydantic, JSON-serializable, so HTTP and gRPC
providers can carry them unchanged), the `RuntimeProvider` protocol (dispatch into a
runtime instance's local queue, run status, cancel, queue pause / resume, capacity) and
the `ScaleOutProvider` protocol, plus the provider error. Must not decide who receives a
run (admission does), nor own tenancy or recovery.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from runtime_core.errors import RuntimeCoreError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import (
    PROVIDER_NAME_KEY,
    TRANSPORT_ENDPOINT_KEY,
    TRANSPORT_NAME_KEY,
    CapacityDescriptor,
    LocalRunStatus,
    LocalRunView,
    QueueStateView,
    TenantRuntimeSettings,
)
from runtime_core.pipeline import PipelineDefinition


class ProviderError(RuntimeCoreError):
    """The provider could not deliver a command to the runtime instance; nothing was dispatched."""

    code = "provider_unavailable"


class ProviderMetadata(BaseModel):
    provider_name: str
    transport_name: str
    transport_endpoint: str = ""

    def as_metadata(self) -> dict[str, str]:
        return {
            PROVIDER_NAME_KEY: self.provider_name,
            TRANSPORT_NAME_KEY: self.transport_name,
            TRANSPORT_ENDPOINT_KEY: self.transport_endpoint,
        }


class DispatchRequest(BaseModel):
    """A shared run delivered to one runtime instance's local queue, with its snapshot.

    `resume_execution_id` is set for a recovered in-flight run: the instance continues that
    ExecutionId instead of creating a new execution.
    """

    runtime_instance_id: str
    shared_run_id: str | None = None
    pipeline: PipelineDefinition
    input: dict[str, Any] = Field(default_factory=dict)
    snapshot: ExecutionContextSnapshot | None
    attributes: dict[str, str] = Field(default_factory=dict)
    resume_execution_id: str | None = None


class DispatchResponse(BaseModel):
    runtime_instance_id: str
    local_run_id: str
    status: LocalRunStatus


class RunRef(BaseModel):
    runtime_instance_id: str
    local_run_id: str


class CancelRunRequest(RunRef):
    reason: str = ""
    requested_by: str = ""


class QueueControlRequest(BaseModel):
    runtime_instance_id: str
    reason: str = ""
    requested_by: str = ""


class ScaleOutProvisionRequest(BaseModel):
    """Create capacity in the tenant scope the request carries (settings copied at request time)."""

    request_id: str
    tenant_settings: TenantRuntimeSettings
    snapshot: ExecutionContextSnapshot


class ScaleOutProvisionResult(BaseModel):
    fulfilled: bool
    runtime_instance_id: str | None = None
    reason: str
    active_instances: int = 0


@runtime_checkable
class RuntimeProvider(Protocol):
    """HOW to reach a runtime instance; `metadata.provider_name` matches registry metadata."""

    metadata: ProviderMetadata

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse: ...

    async def run_status(self, ref: RunRef) -> LocalRunView: ...

    async def cancel_run(self, request: CancelRunRequest) -> LocalRunView: ...

    async def pause_queue(self, request: QueueControlRequest) -> QueueStateView: ...

    async def resume_queue(self, request: QueueControlRequest) -> QueueStateView: ...

    async def capacity(self, runtime_instance_id: str) -> CapacityDescriptor: ...


@runtime_checkable
class ScaleOutProvider(Protocol):
    metadata: ProviderMetadata

    async def scale_out(self, request: ScaleOutProvisionRequest) -> ScaleOutProvisionResult: ...
