"""The gRPC provider end to end: a real runtime-instance process started by the host manager."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import EmbeddedRedis, HotState
from runtime_core.instances import HostTransport, _host_manager
from tests.integration import remote_provider_scenarios as scenario
from tests.integration.remote_support import hosted_control_plane, start_shared_host

TRANSPORT = HostTransport.GRPC


@pytest.fixture
async def plane(
    hot_state: HotState, redis_server: EmbeddedRedis, tmp_path: Path
) -> AsyncIterator[ControlPlane]:
    async with hosted_control_plane(hot_state, redis_server, tmp_path) as started:
        yield started


async def test_grpc_process_registers_two_child_instances_with_grpc_provider_metadata(
    plane: ControlPlane,
) -> None:
    await scenario.process_registers_its_pool_with_provider_metadata(plane, TRANSPORT)


async def test_queue_first_run_drained_over_grpc_completes_in_the_child_process(plane: ControlPlane) -> None:
    await scenario.queue_first_run_drained_by_the_control_plane_completes_in_the_child(plane, TRANSPORT)


async def test_pause_resume_and_capacity_travel_over_grpc(plane: ControlPlane) -> None:
    await scenario.pause_and_resume_reach_the_child_queue_and_its_capacity(plane, TRANSPORT)


async def test_queued_run_status_and_cancel_travel_over_grpc(plane: ControlPlane) -> None:
    await scenario.queued_run_status_and_cancel_travel_to_the_child(plane, TRANSPORT)


async def test_running_run_cancel_over_grpc_cancels_its_execution(plane: ControlPlane) -> None:
    await scenario.running_run_cancel_reaches_execution_control_in_the_child(plane, TRANSPORT)


async def test_dispatch_without_snapshot_over_grpc_raises_missing_snapshot_error(plane: ControlPlane) -> None:
    await scenario.dispatch_without_snapshot_is_refused_with_missing_snapshot_error(plane, TRANSPORT)


async def test_sigterm_unregisters_the_grpc_process_instances_without_rediscovery(
    plane: ControlPlane,
) -> None:
    await scenario.sigterm_unregisters_the_instances_without_rediscovery(plane, TRANSPORT)


async def test_dead_grpc_endpoint_fails_dispatch_with_provider_error_and_item_back_to_pending(
    plane: ControlPlane,
) -> None:
    await scenario.dead_endpoint_fails_dispatch_and_returns_the_item_to_pending(plane, TRANSPORT)


async def test_grpc_scale_out_by_provider_hint_starts_a_tenant_process_through_the_host_manager(
    plane: ControlPlane,
) -> None:
    await scenario.scale_out_with_provider_hint_starts_a_tenant_process_that_runs_the_run(plane, TRANSPORT)


async def test_dispatch_reply_lost_over_grpc_after_the_child_accepted_is_recorded_once_and_runs_once(
    plane: ControlPlane,
) -> None:
    await scenario.lost_dispatch_reply_is_recorded_once_and_the_run_executes_once_in_the_child(
        plane, TRANSPORT
    )


async def test_a_child_whose_port_was_taken_meanwhile_is_started_again_on_another_port(
    plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host manager picks a free port that only the child binds: when another process
    binds it in between, the child exits and is started again on another port."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    taken_port = taken.getsockname()[1]
    ports = iter([taken_port])  # the first port handed out is bound by someone else already
    real = _host_manager.find_free_port
    monkeypatch.setattr(_host_manager, "find_free_port", lambda: next(ports, None) or real())
    try:
        hosted = await start_shared_host(plane, TRANSPORT)
    finally:
        taken.close()
    assert hosted.port != taken_port
    live = {e.runtime_instance_id for e in await plane.parts.registry.entries() if e.live}
    assert set(hosted.runtime_instance_ids) <= live
