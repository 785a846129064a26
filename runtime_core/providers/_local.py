"""The LOCAL provider: in-process delivery to runtime instances hosted by this process.

Owns the mapping of provider requests onto `LocalInstancePool` instances and local
scale-out through `LocalInstanceScaler`. Must not execute steps, mutate DAG state or bypass
an instance's local queue.
"""

from __future__ import annotations

from runtime_core.errors import NotFoundError
from runtime_core.instances import (
    CapacityDescriptor,
    LocalInstancePool,
    LocalInstanceScaler,
    LocalRunRequest,
    LocalRunView,
    QueueStateView,
    RuntimeInstance,
)
from runtime_core.providers._protocol import (
    CancelRunRequest,
    DispatchRequest,
    DispatchResponse,
    ProviderError,
    ProviderMetadata,
    QueueControlRequest,
    RunRef,
    ScaleOutProvisionRequest,
    ScaleOutProvisionResult,
)

LOCAL_PROVIDER_NAME = "local"


class LocalRuntimeProvider:
    """`provider.name = local`, `transport.name = in-memory`."""

    def __init__(self, pool: LocalInstancePool, scaler: LocalInstanceScaler | None = None) -> None:
        self.pool = pool
        self.scaler = scaler
        self.metadata = ProviderMetadata(provider_name=LOCAL_PROVIDER_NAME, transport_name="in-memory")

    def reaches(self, runtime_instance_id: str) -> bool:
        """Only the instances this process hosts: another process's in-process instance is not
        reachable from here (its own control plane dispatches to it)."""
        return self.pool.hosts(runtime_instance_id)

    def _instance(self, runtime_instance_id: str) -> RuntimeInstance:
        try:
            return self.pool.get(runtime_instance_id)
        except NotFoundError as exc:
            raise ProviderError(exc.message, hint=exc.hint) from exc

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        view = await self._instance(request.runtime_instance_id).enqueue(
            LocalRunRequest(
                pipeline=request.pipeline,
                input=request.input,
                snapshot=request.snapshot,
                shared_run_id=request.shared_run_id,
                attributes=request.attributes,
                resume_execution_id=request.resume_execution_id,
            )
        )
        return DispatchResponse(
            runtime_instance_id=view.runtime_instance_id, local_run_id=view.local_run_id, status=view.status
        )

    async def run_status(self, ref: RunRef) -> LocalRunView:
        return self._instance(ref.runtime_instance_id).run_view(ref.local_run_id)

    async def cancel_run(self, request: CancelRunRequest) -> LocalRunView:
        return await self._instance(request.runtime_instance_id).cancel_run(
            request.local_run_id, reason=request.reason, requested_by=request.requested_by
        )

    async def pause_queue(self, request: QueueControlRequest) -> QueueStateView:
        return await self._instance(request.runtime_instance_id).pause_queue(
            reason=request.reason, requested_by=request.requested_by
        )

    async def resume_queue(self, request: QueueControlRequest) -> QueueStateView:
        return await self._instance(request.runtime_instance_id).resume_queue(
            requested_by=request.requested_by
        )

    async def capacity(self, runtime_instance_id: str) -> CapacityDescriptor:
        return self._instance(runtime_instance_id).capacity()

    async def scale_out(self, request: ScaleOutProvisionRequest) -> ScaleOutProvisionResult:
        if self.scaler is None:
            return ScaleOutProvisionResult(fulfilled=False, reason="local scale-out is not configured")
        outcome = await self.scaler.scale_out(request.tenant_settings, request.snapshot)
        return ScaleOutProvisionResult.model_validate(outcome.model_dump())
