"""Provider-agnostic scenarios of a runtime-instance process, run over HTTP and over gRPC.

Each function is one behaviour; `test_http_provider.py` and `test_grpc_provider.py` name
and run them for their transport against a control plane from `hosted_control_plane`.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.errors import MissingSnapshotError
from runtime_core.hosting import CONTROL_PLANE_ID_KEY, HOST_ID_KEY
from runtime_core.instances import (
    PROVIDER_NAME_KEY,
    TRANSPORT_ENDPOINT_KEY,
    TRANSPORT_NAME_KEY,
    HostStartError,
    HostTransport,
    IsolationMode,
    LocalRunStatus,
)
from runtime_core.observability import METRICS_ENDPOINT_KEY
from runtime_core.providers import (
    CancelRunRequest,
    DispatchRequest,
    DispatchResponse,
    ProviderError,
    RemoteRuntimeProvider,
    RunRef,
)
from runtime_core.queueing import QueueItemStatus, ScaleOutStatus, SharedRunStatus, SubmitMode
from tests.helpers import wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT, ONE_STEP, TENANT_A
from tests.integration.remote_support import (
    APPROVAL,
    hosts,
    remote_provider,
    start_shared_host,
    wait_local_status,
)


class LostDispatchReply:
    """A remote provider whose dispatches reach the child process but whose replies are lost."""

    def __init__(self, inner: RemoteRuntimeProvider) -> None:
        self.inner = inner
        self.metadata = inner.metadata
        self.accepted: list[DispatchResponse] = []

    async def dispatch(self, request: DispatchRequest) -> DispatchResponse:
        self.accepted.append(await self.inner.dispatch(request))
        raise ProviderError("injected: the dispatch reply was lost")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # every other command (and aclose) reaches the inner provider


async def process_registers_its_pool_with_provider_metadata(
    plane: ControlPlane, transport: HostTransport
) -> None:
    hosted = await start_shared_host(plane, transport, pool_size=2)
    entries = {e.runtime_instance_id: e for e in await plane.parts.registry.entries()}
    prefix = f"rt_{hosted.host_id}:runtime-{transport.value}"
    assert hosted.runtime_instance_ids == [f"{prefix}-1", f"{prefix}-2"]
    assert sorted(entries) == hosted.runtime_instance_ids
    expected_endpoint = (
        f"http://127.0.0.1:{hosted.port}" if transport is HostTransport.HTTP else f"127.0.0.1:{hosted.port}"
    )
    for entry in entries.values():
        metadata = dict(entry.descriptor.metadata)
        # An HTTP process serves /metrics on its command port, a gRPC one on a port of its own.
        metrics = metadata.pop(METRICS_ENDPOINT_KEY)
        if transport is HostTransport.HTTP:
            assert metrics == f"{expected_endpoint}/metrics"
        else:
            assert metrics.startswith("http://127.0.0.1:") and metrics.endswith("/metrics")
            assert metrics != f"http://{expected_endpoint}/metrics"
        assert metadata == {
            PROVIDER_NAME_KEY: transport.value,
            TRANSPORT_NAME_KEY: transport.value,
            TRANSPORT_ENDPOINT_KEY: expected_endpoint,
            CONTROL_PLANE_ID_KEY: plane.settings.control_plane_id,
            HOST_ID_KEY: hosted.host_id,
        }
        assert entry.live and entry.capacity.can_accept_run
    assert await hosts(plane).recorded_hosts() == [hosted]


async def queue_first_run_drained_by_the_control_plane_completes_in_the_child(
    plane: ControlPlane, transport: HostTransport
) -> None:
    hosted = await start_shared_host(plane, transport, pool_size=2)
    submitted = await plane.submit(ONE_STEP, {"x": 1}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    drained = await plane.drain(10, DEFAULT_TENANT)
    [drained_run] = drained.runs
    assert drained.dispatched == 1 and drained_run.assigned_runtime_instance_id in hosted.runtime_instance_ids

    await wait_local_status(plane, submitted.shared_run_id, DEFAULT_TENANT, LocalRunStatus.COMPLETED)
    view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
    run = await plane.parts.runs.get(submitted.shared_run_id)
    assert view.shared_status == SharedRunStatus.DISPATCHED and view.execution_status == "Completed"
    assert view.local_run_id == drained_run.local_run_id and view.execution_id
    assert run is not None and run.provider_name == transport.value
    assert plane.parts.pool.instances() == []  # nothing ran in the control plane's process


async def pause_and_resume_reach_the_child_queue_and_its_capacity(
    plane: ControlPlane, transport: HostTransport
) -> None:
    [runtime_instance_id] = (await start_shared_host(plane, transport, pool_size=1)).runtime_instance_ids
    provider = remote_provider(plane, transport)

    paused = await plane.pause_queue(runtime_instance_id, DEFAULT_TENANT, reason="maintenance")
    paused_capacity = await provider.capacity(runtime_instance_id)
    resumed = await plane.resume_queue(runtime_instance_id, DEFAULT_TENANT)
    resumed_capacity = await provider.capacity(runtime_instance_id)

    assert paused.paused and paused.reason == "maintenance" and paused.requested_by == DEFAULT_TENANT.user_id
    assert paused_capacity.queue_paused and not paused_capacity.can_accept_run
    assert not resumed.paused
    assert not resumed_capacity.queue_paused and resumed_capacity.can_accept_run
    assert resumed_capacity.provider_name == transport.value


async def queued_run_status_and_cancel_travel_to_the_child(
    plane: ControlPlane, transport: HostTransport
) -> None:
    [runtime_instance_id] = (await start_shared_host(plane, transport, pool_size=1)).runtime_instance_ids
    provider = remote_provider(plane, transport)
    await plane.pause_queue(runtime_instance_id, DEFAULT_TENANT)

    dispatched = await provider.dispatch(
        DispatchRequest(runtime_instance_id=runtime_instance_id, pipeline=ONE_STEP, snapshot=DEFAULT_TENANT)
    )
    ref = RunRef(runtime_instance_id=runtime_instance_id, local_run_id=dispatched.local_run_id)
    queued = await provider.run_status(ref)
    cancelled = await provider.cancel_run(CancelRunRequest(**ref.model_dump(), reason="not needed"))

    assert (
        dispatched.status is LocalRunStatus.QUEUED and dispatched.runtime_instance_id == runtime_instance_id
    )
    assert queued.status is LocalRunStatus.QUEUED and queued.execution_id is None
    assert cancelled.status is LocalRunStatus.CANCELLED and cancelled.execution_id is None
    assert cancelled.failure_reason == "not needed"


async def running_run_cancel_reaches_execution_control_in_the_child(
    plane: ControlPlane, transport: HostTransport
) -> None:
    [runtime_instance_id] = (await start_shared_host(plane, transport, pool_size=1)).runtime_instance_ids
    provider = remote_provider(plane, transport)
    dispatched = await provider.dispatch(
        DispatchRequest(runtime_instance_id=runtime_instance_id, pipeline=APPROVAL, snapshot=DEFAULT_TENANT)
    )
    ref = RunRef(runtime_instance_id=runtime_instance_id, local_run_id=dispatched.local_run_id)

    async def running_with_execution() -> bool:
        view = await provider.run_status(ref)
        return view.status is LocalRunStatus.RUNNING and view.execution_id is not None

    await wait_until(running_with_execution, timeout=20, interval=0.05)
    requested = await provider.cancel_run(CancelRunRequest(**ref.model_dump(), reason="operator stop"))

    async def cancelled() -> bool:
        return (await provider.run_status(ref)).status is LocalRunStatus.CANCELLED

    await wait_until(cancelled, timeout=20, interval=0.05)
    final = await provider.run_status(ref)
    execution = await plane.parts.dag_store.read_execution(final.execution_id or "")
    # the answer to cancel may already show the finished cancellation
    assert requested.status in (LocalRunStatus.RUNNING, LocalRunStatus.CANCELLED)
    assert requested.execution_id == final.execution_id
    assert execution is not None and execution.meta.status == "Cancelled"


async def dispatch_without_snapshot_is_refused_with_missing_snapshot_error(
    plane: ControlPlane, transport: HostTransport
) -> None:
    [runtime_instance_id] = (await start_shared_host(plane, transport, pool_size=1)).runtime_instance_ids
    provider = remote_provider(plane, transport)

    with pytest.raises(MissingSnapshotError) as refused:
        await provider.dispatch(
            DispatchRequest(runtime_instance_id=runtime_instance_id, pipeline=ONE_STEP, snapshot=None)
        )
    capacity = await provider.capacity(runtime_instance_id)
    assert "refuses a run without an ExecutionContextSnapshot" in refused.value.message
    assert refused.value.hint
    assert (capacity.queued, capacity.running) == (0, 0)


async def sigterm_unregisters_the_instances_without_rediscovery(
    plane: ControlPlane, transport: HostTransport
) -> None:
    hosted = await start_shared_host(plane, transport, pool_size=2)
    await plane.parts.discovery.withdraw(plane.settings.control_plane_id)  # shutdown must not need it

    exit_code = await hosts(plane).stop_host(hosted.host_id)
    registered = {e.runtime_instance_id for e in await plane.parts.registry.entries()}

    assert exit_code == 0
    assert registered.isdisjoint(hosted.runtime_instance_ids)
    assert await hosts(plane).recorded_hosts() == []


async def dead_endpoint_fails_dispatch_and_returns_the_item_to_pending(
    plane: ControlPlane, transport: HostTransport
) -> None:
    hosted = await start_shared_host(plane, transport, pool_size=1)
    [runtime_instance_id] = hosted.runtime_instance_ids
    await hosts(plane).kill_host(hosted.host_id)  # its registry entry stays live until it goes stale
    provider = remote_provider(plane, transport)

    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    drained = await plane.drain(1, DEFAULT_TENANT)
    [attempt] = drained.runs
    item = await plane.parts.queue.item(submitted.shared_run_id)
    run = await plane.parts.runs.get(submitted.shared_run_id)

    assert (drained.dispatched, drained.failed) == (0, 1)
    assert attempt.assigned_runtime_instance_id == runtime_instance_id and attempt.local_run_id is None
    assert item is not None and item.status is QueueItemStatus.PENDING
    assert run is not None and run.status is SharedRunStatus.QUEUED_GLOBALLY and run.local_run_id is None
    assert await plane.parts.index.get_by_shared(submitted.shared_run_id) is None
    # The unanswered dispatch backs this process off the instance: no run is offered to it
    # meanwhile (the run stays queued, no attempt fails), though a direct call still fails.
    assert not provider.reaches(runtime_instance_id)
    again = await plane.drain(1, DEFAULT_TENANT)
    assert (again.dispatched, again.failed) == (0, 0)
    with pytest.raises(ProviderError):
        await provider.dispatch(
            DispatchRequest(
                runtime_instance_id=runtime_instance_id, pipeline=ONE_STEP, snapshot=DEFAULT_TENANT
            )
        )


async def process_without_control_plane_discovery_refuses_to_start(
    plane: ControlPlane, transport: HostTransport
) -> None:
    await plane.parts.discovery.withdraw(plane.settings.control_plane_id)

    with pytest.raises(HostStartError) as refused:
        await start_shared_host(plane, transport, pool_size=1)

    assert "exited with code 2 before registering" in refused.value.message
    assert "No control plane published a discovery record" in (refused.value.hint or "")
    assert await plane.parts.registry.entries() == []


async def scale_out_with_provider_hint_starts_a_tenant_process_that_runs_the_run(
    plane: ControlPlane, transport: HostTransport
) -> None:
    submitted = await plane.submit(
        ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, TENANT_A, provider_hint=transport.value
    )
    assert submitted.status is SharedRunStatus.SCALE_OUT_REQUESTED

    async def handled() -> bool:
        request = await plane.parts.scale_out.get(submitted.scale_out_request_id or "")
        return request is not None and request.status is ScaleOutStatus.FULFILLED

    await wait_until(handled, timeout=30, interval=0.05)
    request = await plane.parts.scale_out.get(submitted.scale_out_request_id or "")
    await plane.drain(10, TENANT_A)
    await wait_local_status(plane, submitted.shared_run_id, TENANT_A, LocalRunStatus.COMPLETED)
    [hosted] = hosts(plane).hosts()
    [entry] = await plane.parts.registry.entries()
    run = await plane.parts.runs.get(submitted.shared_run_id)

    assert request is not None
    assert request.fulfilled_runtime_instance_id == f"rt_{hosted.host_id}:tenant-a-runtime-1"
    assert entry.runtime_instance_id == request.fulfilled_runtime_instance_id
    assert (
        entry.descriptor.isolation_mode is IsolationMode.DEDICATED
        and entry.descriptor.tenant_id == "tenant-a"
    )
    assert entry.descriptor.provider_name == transport.value and hosted.transport is transport
    assert run is not None and run.assigned_runtime_instance_id == request.fulfilled_runtime_instance_id


async def lost_dispatch_reply_is_recorded_once_and_the_run_executes_once_in_the_child(
    plane: ControlPlane, transport: HostTransport
) -> None:
    await start_shared_host(plane, transport, pool_size=1)
    lost = LostDispatchReply(remote_provider(plane, transport))
    plane.parts.providers.add(lost)
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    drained = await plane.drain(10, DEFAULT_TENANT)
    [accepted] = lost.accepted
    [drained_run] = drained.runs

    await wait_local_status(plane, submitted.shared_run_id, DEFAULT_TENANT, LocalRunStatus.COMPLETED)
    view = await plane.run_status(submitted.shared_run_id, DEFAULT_TENANT)
    item = await plane.parts.queue.item(submitted.shared_run_id)
    records = [
        r
        for r in await plane.parts.index.list_tenant(DEFAULT_TENANT)
        if r.shared_run_id == submitted.shared_run_id
    ]
    assert (drained.dispatched, drained.failed) == (1, 0)
    assert drained_run.local_run_id == accepted.local_run_id
    assert view.shared_status == SharedRunStatus.DISPATCHED and view.execution_status == "Completed"
    assert view.local_run_id == accepted.local_run_id and view.execution_id
    assert [(r.local_run_id, r.execution_id) for r in records] == [(accepted.local_run_id, view.execution_id)]
    assert item is not None and item.status is QueueItemStatus.DISPATCHED
