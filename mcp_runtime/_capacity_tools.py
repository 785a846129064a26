"""Tool `capacity.list`: the runtime capacity a tenant's operators may watch.

Owns shaping the control plane's tenant-scoped capacity view (instances visible to the caller's
tenant; activity figures only for instances serving that tenant alone) into the tool answer.
`instances.list` stays the administrators' full view. Must not read the registry itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mcp_runtime._capacity_outputs import CapacityListOutput, TenantCapacityInfo
from mcp_runtime._inputs import CapacityListInput
from mcp_runtime._registration import ToolCall, ToolSpec
from runtime_core.control_plane import ControlPlane, TenantCapacityView


def capacity_info(view: TenantCapacityView) -> TenantCapacityInfo:
    return TenantCapacityInfo(
        runtime_instance_id=view.runtime_instance_id,
        status=view.status,
        live=view.live,
        isolation_mode=view.isolation_mode.value,
        dedicated_to_tenant=view.dedicated_to_tenant,
        worker_count=view.worker_count,
        max_concurrent_runs=view.max_concurrent_runs,
        queue_capacity=view.queue_capacity,
        is_queue_paused=view.queue_paused,
        last_heartbeat_at=datetime.fromtimestamp(view.last_heartbeat_at_ms / 1000, tz=UTC),
        provider_name=view.provider_name,
        transport_name=view.transport_name,
        active_worker_count=view.active_workers,
        queued_run_count=view.queued,
        running_run_count=view.running,
        available_run_slots=view.available_run_slots,
        can_accept_run=view.can_accept_run,
    )


class CapacityTools:
    def __init__(self, control_plane: ControlPlane) -> None:
        self._control_plane = control_plane

    async def capacity(self, request: CapacityListInput, call: ToolCall) -> CapacityListOutput:
        views = await self._control_plane.tenant_capacity(call.snapshot)
        return CapacityListOutput(
            tenant_id=call.snapshot.tenant_id, instances=[capacity_info(v) for v in views]
        )

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name="capacity.list",
                title="Capacity visible to your tenant",
                description=(
                    "The runtime instances your tenant's runs can go to: size (workers, run slots, queue "
                    "capacity), state (live, queue paused, heartbeat), isolation and provider. Activity "
                    "(busy workers, queued and running runs, free slots, can_accept_run) is shown only for "
                    "instances dedicated to your tenant: shared capacity also runs other tenants' work, "
                    "which is not shown. Administrators see every figure with instances.list."
                ),
                input_model=CapacityListInput,
                output_model=CapacityListOutput,
                handler=self.capacity,
                read_only=True,
                idempotent=True,
            )
        ]
