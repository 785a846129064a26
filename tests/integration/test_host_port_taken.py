"""A runtime-instance process whose port another process took before it could listen exits with
`PORT_TAKEN_EXIT_CODE`, and its host manager starts it again on another port (HTTP and gRPC)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_core.hot_state import EmbeddedRedis, HotState, find_free_port
from runtime_core.instances import HostTransport
from runtime_core.instances import _host_manager as host_manager
from tests.integration.remote_support import hosted_control_plane, hosts, start_shared_host


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port some other process listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize("transport", [HostTransport.HTTP, HostTransport.GRPC])
async def test_a_child_whose_port_was_taken_is_started_again_on_another_port(
    hot_state: HotState,
    redis_server: EmbeddedRedis,
    tmp_path: Path,
    taken_port: int,
    transport: HostTransport,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offered = iter([taken_port])  # the first free-port pick loses the race to another process
    monkeypatch.setattr(host_manager, "find_free_port", lambda: next(offered, None) or find_free_port())
    async with hosted_control_plane(hot_state, redis_server, tmp_path) as plane:
        hosted = await start_shared_host(plane, transport, pool_size=1)
        assert hosted.port != taken_port
        [entry] = await plane.parts.registry.entries()  # registered: start_host waited for it
        assert entry.runtime_instance_id in hosted.runtime_instance_ids
        log = await asyncio.to_thread(Path(hosted.log_path).read_text, errors="replace")
        assert f"{taken_port}" in log  # the first attempt said which port it could not listen on
        await hosts(plane).stop_host(hosted.host_id)
