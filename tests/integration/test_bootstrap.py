"""RuntimeServices starts all parts or none: a failed start leaves nothing running."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.errors import StoreUnavailableError
from runtime_core.hot_state import find_free_port
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.storage import DurableStoreSettings
from tests.e2e.mcp_support import processes_working_in


async def test_failed_start_stops_the_embedded_redis_it_already_started(tmp_path: Path) -> None:
    unreachable = f"postgresql://postgres@127.0.0.1:{find_free_port()}/nowhere"
    durable = DurableStoreSettings.from_url(unreachable, postgresql_timeout_ms=500)
    settings = RuntimeSettings(data_dir=tmp_path, durable=durable)
    with pytest.raises(StoreUnavailableError):
        async with RuntimeServices(settings):
            pytest.fail("services must not start without their durable store")
    assert processes_working_in(tmp_path / "redis") == []


async def test_embedded_default_starts_and_stops_cleanly(tmp_path: Path) -> None:
    async with RuntimeServices(RuntimeSettings(data_dir=tmp_path)) as services:
        assert processes_working_in(tmp_path / "redis") != []
        snapshot = ExecutionContextSnapshot(user_id="u", tenant_id="default")
        assert len(await services.control_plane.list_instances(snapshot)) == 1
    assert processes_working_in(tmp_path / "redis") == []
