"""A stored schedule that no longer reads, through the `schedules.*` tools of a real MCP client
session (a real runtime: test redis-server, SQLite store): a row damaged behind the store's
back, and rows whose stored spec or pipeline this release refuses. The tenant's other schedules still
list; the unreadable ones are listed apart, by id and name, with what is wrong (never the
stored values) and what to do; reading, pausing, resuming or triggering one is a coded error
that changes nothing; deleting it works, for its own tenant only."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_runtime import Principal
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.storage import SqliteDurableStore
from tests.durable_backends import sqlite_schedule_damage
from tests.integration.schedule_support import HoldExecutor, new_tenant, runs_of, scheduling_runtime
from tests.reliability.mcp_rig import call as call_tool
from tests.reliability.mcp_rig import error_code, error_text, held_session, ok, server_for, tool_backend

SECRET = "sk-live-kept-in-a-damaged-schedule-5150"
YEARLY = {"pipeline": "rag-final-test", "cron": "0 0 1 1 *"}  # never fires during the test


@pytest.fixture(scope="module")
async def rig(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Any, HoldExecutor]]:
    async for opened in scheduling_runtime(redis_server.url, Path(tmp_path_factory.mktemp("unreadable"))):
        yield opened


def _principal(tenant_id: str, user: str) -> Principal:
    return Principal(name=user, user_id=user, tenant_id=tenant_id, roles=("operator",))


def _stored_row(path: Path, schedule_id: str) -> tuple[Any, ...] | None:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT * FROM schedules WHERE schedule_id = ?", (schedule_id,)).fetchone()


def _break_spec(path: Path, schedule_id: str) -> None:
    """A spec this release refuses (no such time zone), as a row written by another release."""
    spec = json.dumps({"cron": "0 0 1 1 *", "timezone": SECRET})
    with sqlite3.connect(path) as db:
        db.execute("UPDATE schedules SET spec = ? WHERE schedule_id = ?", (spec, schedule_id))


def _break_pipeline(path: Path, schedule_id: str) -> None:
    """A stored pipeline this release refuses (its steps not a list), as another release wrote it."""
    pipeline = json.dumps({"name": "rag-final-test", "steps": {"only": SECRET}})
    with sqlite3.connect(path) as db:
        db.execute("UPDATE schedules SET pipeline = ? WHERE schedule_id = ?", (pipeline, schedule_id))


async def test_unreadable_schedules_are_listed_apart_refused_without_change_and_deletable_by_their_tenant(
    rig: tuple[Any, HoldExecutor],
) -> None:
    services, _ = rig
    store = services.durable_store
    assert isinstance(store, SqliteDurableStore)
    tenant = new_tenant("owner")
    owner, intruder = _principal(tenant.tenant_id, "olga"), _principal(new_tenant().tenant_id, "ivan")
    async with (
        held_session(server_for(tool_backend(services), owner)) as client,
        held_session(server_for(tool_backend(services), intruder)) as foreign,
    ):
        ids = {}
        for name in ("a-fine", "b-damaged", "c-refused-spec", "d-refused-pipeline"):
            created = await ok(client, "schedules.create", {"name": name, **YEARLY})
            ids[name] = created["schedule"]["schedule_id"]
        damaged, refused, unfit = ids["b-damaged"], ids["c-refused-spec"], ids["d-refused-pipeline"]
        await sqlite_schedule_damage(store.path)(damaged, json.dumps([SECRET]))
        _break_spec(store.path, refused)
        _break_pipeline(store.path, unfit)

        listed = await ok(client, "schedules.list", {})
        assert [s["name"] for s in listed["schedules"]] == ["a-fine"]
        assert [(u["schedule_id"], u["name"]) for u in listed["unreadable"]] == [
            (damaged, "b-damaged"),
            (refused, "c-refused-spec"),
            (unfit, "d-refused-pipeline"),
        ]
        assert "input" in listed["unreadable"][0]["problem"]
        assert "timezone" in listed["unreadable"][1]["problem"]
        assert "steps" in listed["unreadable"][2]["problem"]
        assert all("schedules.delete" in u["next_step"] for u in listed["unreadable"])
        assert listed["next_after_name"] is None
        page = await ok(client, "schedules.list", {"limit": 2})  # the damaged row counts in the page
        assert ([s["name"] for s in page["schedules"]], page["next_after_name"]) == (["a-fine"], "b-damaged")

        rows_before = {sid: _stored_row(store.path, sid) for sid in (damaged, refused, unfit)}
        refusals: list[str] = []
        for tool in ("schedules.get", "schedules.pause", "schedules.resume", "schedules.trigger"):
            for schedule_id in (damaged, refused, unfit):
                result = await call_tool(client, tool, {"schedule_id": schedule_id})
                assert result.is_error and error_code(result) == "record_unreadable", (
                    tool,
                    error_text(result),
                )
                assert schedule_id in error_text(result) and "schedules.delete" in error_text(result)
                refusals.append(error_text(result))
        assert {sid: _stored_row(store.path, sid) for sid in rows_before} == rows_before  # nothing changed
        assert await runs_of(services, tenant) == []  # no trigger made a run

        result = await call_tool(foreign, "schedules.delete", {"schedule_id": damaged})
        assert result.is_error and error_code(result) == "not_found"  # another tenant's id
        assert _stored_row(store.path, damaged) == rows_before[damaged]

        unreadable = (damaged, refused, unfit)
        deleted = [await ok(client, "schedules.delete", {"schedule_id": sid}) for sid in unreadable]
        assert [d["schedule"] for d in deleted] == [None, None, None]
        assert [d["unreadable"]["schedule_id"] for d in deleted] == list(unreadable)
        assert [_stored_row(store.path, sid) for sid in unreadable] == [None, None, None]
        after = await ok(client, "schedules.list", {})
        assert ([s["name"] for s in after["schedules"]], after["unreadable"]) == (["a-fine"], [])
        fine = await ok(client, "schedules.delete", {"schedule_id": ids["a-fine"]})
        assert fine["schedule"]["status"] == "deleted" and fine["unreadable"] is None

    shown = json.dumps([listed, page, deleted, refusals])
    assert SECRET not in shown
