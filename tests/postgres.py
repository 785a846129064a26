"""PostgreSQL for tests: the shared server on 127.0.0.1:5432 (scripts/ensure-postgres.sh makes sure
it answers; user postgres, trust) and scratch databases, each with a unique name, created by a
test (or a test module) and dropped after it, whatever happened."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

HOST, PORT, USER = "127.0.0.1", 5432, "postgres"
ADMIN_CONNINFO = f"host={HOST} port={PORT} user={USER} dbname=postgres connect_timeout=5"
_ENSURE_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ensure-postgres.sh"


def ensure_server() -> None:
    """Start (or install) the server when none answers; returns at once when one does."""
    subprocess.run(["bash", str(_ENSURE_SCRIPT)], check=True)


def conninfo_of(name: str) -> str:
    """The superuser conninfo of database `name` (for a test's own reads and writes)."""
    return ADMIN_CONNINFO.replace("dbname=postgres", f"dbname={name}")


def database_url(name: str, **params: str) -> str:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"postgresql://{USER}@{HOST}:{PORT}/{name}" + (f"?{query}" if query else "")


@contextmanager
def scratch_database(prefix: str = "mcprt_test") -> Iterator[str]:
    """A new empty database; yields its name, drops it (closing its connections) afterwards."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(ADMIN_CONNINFO, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(ADMIN_CONNINFO, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def empty_tables(name: str) -> None:
    """Delete every row of every table of database `name` but the applied migrations: a clean
    store for the next test without creating a database (and migrating it) again."""
    async with await psycopg.AsyncConnection.connect(conninfo_of(name), autocommit=True) as connection:
        cursor = await connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'"
        )
        tables = [sql.Identifier(table) for (table,) in await cursor.fetchall()]
        async with connection.transaction():  # DELETE: TRUNCATE's new files cost ~30 ms a table
            for table in tables:
                await connection.execute(sql.SQL("DELETE FROM {}").format(table))
