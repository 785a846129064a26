"""The dashboard's schedules page over real HTTP (a served control plane, schedules made through
real MCP sessions): a tenant's schedules with their next and last fire times, only its own,
and a schedule stored damaged shown apart with what is wrong, never failing the page."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_core.hot_state import EmbeddedRedis
from runtime_core.storage import SQLITE_FILE_NAME
from tests.e2e.dashboard_support import call, mcp_session, served_dashboard, sign_in

SECRET = "sk-live-in-a-damaged-schedule-row-8080"
YEARLY = {"pipeline": "rag-final-test", "cron": "0 0 1 1 *"}  # never fires during the test


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dashboard-schedules")


@pytest.fixture(scope="module")
def base_url(redis_server: EmbeddedRedis, data_dir: Path) -> Iterator[str]:
    with served_dashboard(redis_server.url, data_dir) as url:
        yield url


async def test_schedules_page_lists_the_tenants_schedules_with_next_and_last_fire_times(
    base_url: str,
) -> None:
    async with mcp_session(base_url, "acme-operator") as acme:
        created = await call(
            acme,
            "schedules.create",
            {
                "name": "dashboard-nightly",
                "pipeline": "rag-final-test",
                "cron": "30 2 * * *",
                "timezone": "Asia/Tokyo",
            },
        )
        schedule_id = created["schedule"]["schedule_id"]
        run = await call(acme, "schedules.trigger", {"schedule_id": schedule_id})
        await call(acme, "schedules.pause", {"schedule_id": schedule_id})
    try:
        with sign_in(base_url, "acme-viewer") as viewer, sign_in(base_url, "globex-operator") as globex:
            as_viewer = viewer.get("/ui/schedules").text
            as_globex = globex.get("/ui/schedules").text
        assert "dashboard-nightly" in as_viewer and "<code>30 2 * * *</code> (Asia/Tokyo)" in as_viewer
        assert "paused" in as_viewer and 'href="/ui/schedules" aria-current="page"' in as_viewer
        assert schedule_id not in as_globex and "has no schedule" in as_globex
        async with mcp_session(base_url, "acme-operator") as acme:
            await call(acme, "schedules.resume", {"schedule_id": schedule_id})
        with sign_in(base_url, "acme-viewer") as viewer:
            resumed = viewer.get("/ui/schedules").text
        next_fire = created["schedule"]["next_fire_at"][:10]
        assert next_fire in resumed  # the next tick (02:30 in Tokyo = 17:30 UTC)
        assert run["shared_run_id"] not in resumed  # a manual trigger is not a tick
    finally:
        async with mcp_session(base_url, "acme-operator") as acme:
            await call(acme, "schedules.delete", {"schedule_id": schedule_id})


async def test_a_damaged_schedule_is_shown_apart_with_what_is_wrong_and_the_others_still_list(
    base_url: str, data_dir: Path
) -> None:
    async with mcp_session(base_url, "acme-operator") as acme:
        ids = []
        for name in ("dashboard-fine", "dashboard-damaged"):
            created = await call(acme, "schedules.create", {"name": name, **YEARLY})
            ids.append(created["schedule"]["schedule_id"])
    with sqlite3.connect(data_dir / SQLITE_FILE_NAME) as db:  # behind the server's back
        db.execute("UPDATE schedules SET input = ? WHERE schedule_id = ?", (json.dumps([SECRET]), ids[1]))
    try:
        with sign_in(base_url, "acme-viewer") as viewer:
            shown = viewer.get("/ui/schedules").text
        assert "dashboard-fine" in shown  # the readable schedule still lists
        assert "Unreadable schedules" in shown and f"<code>{ids[1]}</code>" in shown
        assert "ValidationError of ScheduleRecord: input" in shown and "schedules.delete" in shown
        assert SECRET not in shown
    finally:
        async with mcp_session(base_url, "acme-operator") as acme:
            for schedule_id in ids:
                await call(acme, "schedules.delete", {"schedule_id": schedule_id})
    with sign_in(base_url, "acme-viewer") as viewer:
        after = viewer.get("/ui/schedules").text
    assert "Unreadable schedules" not in after and ids[1] not in after
