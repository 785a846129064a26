"""The SQL durable stores a test can run on: SQLite in the test's tmp_path, or PostgreSQL in the
module's scratch database (emptied before each test), each with a way to damage a stored payload
or schedule behind the store's back (as a failing disk or an operator would)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from runtime_core.storage import DurableStore, DurableStoreSettings, open_durable_store
from tests.postgres import conninfo_of, database_url, empty_tables

SQL_BACKENDS = ("sqlite", "postgresql")

# (payload_id, new body or None to delete the payload)
PayloadDamage = Callable[[str, bytes | None], Awaitable[None]]
# (schedule_id, the JSON text its stored `input` becomes)
ScheduleDamage = Callable[[str, str], Awaitable[None]]


@dataclass
class DurableBackend:
    name: str
    store: DurableStore
    damage_payload: PayloadDamage
    damage_schedule: ScheduleDamage


def _sqlite_damage(path: Path) -> PayloadDamage:
    async def damage(payload_id: str, body: bytes | None) -> None:
        with sqlite3.connect(path) as db:
            if body is None:
                db.execute("DELETE FROM payloads WHERE payload_id = ?", (payload_id,))
            else:
                db.execute("UPDATE payloads SET body = ? WHERE payload_id = ?", (body, payload_id))

    return damage


def sqlite_schedule_damage(path: Path) -> ScheduleDamage:
    async def damage(schedule_id: str, input_json: str) -> None:
        with sqlite3.connect(path) as db:
            db.execute("UPDATE schedules SET input = ? WHERE schedule_id = ?", (input_json, schedule_id))

    return damage


def _postgresql_damage(name: str) -> PayloadDamage:
    async def damage(payload_id: str, body: bytes | None) -> None:
        async with await psycopg.AsyncConnection.connect(conninfo_of(name), autocommit=True) as db:
            if body is None:
                await db.execute("DELETE FROM payloads WHERE payload_id = %s", (payload_id,))
            else:
                await db.execute("UPDATE payloads SET body = %s WHERE payload_id = %s", (body, payload_id))

    return damage


def _postgresql_schedule_damage(name: str) -> ScheduleDamage:
    async def damage(schedule_id: str, input_json: str) -> None:
        async with await psycopg.AsyncConnection.connect(conninfo_of(name), autocommit=True) as db:
            await db.execute(
                "UPDATE schedules SET input = %s::jsonb WHERE schedule_id = %s", (input_json, schedule_id)
            )

    return damage


@asynccontextmanager
async def sql_backend(
    request: pytest.FixtureRequest, kind: str, tmp_path: Path
) -> AsyncIterator[DurableBackend]:
    """Open `kind`; PostgreSQL uses the `postgres_module_database` fixture's database."""
    if kind == "sqlite":
        settings = DurableStoreSettings.embedded(tmp_path)
        assert settings.sqlite_path is not None
        damage, schedule_damage = (
            _sqlite_damage(settings.sqlite_path),
            sqlite_schedule_damage(settings.sqlite_path),
        )
    else:
        name = request.getfixturevalue("postgres_module_database")
        settings = DurableStoreSettings.from_url(database_url(name))
        damage, schedule_damage = _postgresql_damage(name), _postgresql_schedule_damage(name)
    store = await open_durable_store(settings)
    try:
        if kind == "postgresql":
            await empty_tables(request.getfixturevalue("postgres_module_database"))
        yield DurableBackend(kind, store, damage, schedule_damage)
    finally:
        await store.close()
