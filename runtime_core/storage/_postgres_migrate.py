"""Schema migrations of the PostgreSQL durable store, applied at start under an advisory lock.

Owns the `schema_migrations` table (one row per applied version with its checksum), the lock
that makes several processes starting at once migrate once (a transaction-scoped advisory
lock: the first applies what is missing in one transaction, the others wait, then find nothing
to do), and the check that refuses to run code older than the database. Must not know about
records or queries.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from psycopg import AsyncConnection
from psycopg.rows import tuple_row

from runtime_core.storage._errors import SchemaVersionError
from runtime_core.storage._postgres_schema import Migration

log = logging.getLogger("runtime_core.storage")

# One lock per database (advisory locks are scoped by database): a stable 64-bit key.
SCHEMA_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"mcp-runtime durable schema").digest()[:8], "big", signed=True
)

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    description text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


async def migrate(connection: AsyncConnection, migrations: Sequence[Migration]) -> list[int]:
    """Apply the migrations the database lacks, in one transaction; returns the versions applied.

    SchemaVersionError (nothing applied) when the database carries a version this code does not
    know, or a known version whose SQL changed since it was applied.
    """
    async with connection.transaction(), connection.cursor(row_factory=tuple_row) as cursor:
        await cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        if not (await cursor.fetchone() or (False,))[0]:
            log.info("durable_store.schema_lock_wait lock_key=%s", SCHEMA_LOCK_KEY)
            await cursor.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        await cursor.execute(_CREATE_TABLE)
        await cursor.execute("SELECT version, checksum FROM schema_migrations ORDER BY version")
        applied = {int(version): str(checksum) for version, checksum in await cursor.fetchall()}
        _check_known(applied, migrations)
        pending = [m for m in migrations if m.version not in applied]
        for migration in pending:
            await cursor.execute(migration.sql)
            await cursor.execute(
                "INSERT INTO schema_migrations (version, description, checksum) VALUES (%s, %s, %s)",
                (migration.version, migration.description, migration.checksum),
            )
    versions = [m.version for m in pending]
    if versions:
        log.info("durable_store.migrated versions=%s", ",".join(map(str, versions)))
    return versions


def _check_known(applied: dict[int, str], migrations: Sequence[Migration]) -> None:
    known = {m.version: m for m in migrations}
    newest_known = max(known, default=0)
    unknown = sorted(v for v in applied if v not in known)
    if unknown:
        raise SchemaVersionError(
            f"the PostgreSQL durable store is at schema version {max(unknown)}, newer than this code "
            f"knows (up to {newest_known}): a newer mcp-runtime migrated it",
            hint="Upgrade mcp-runtime on this host to the release that migrated the database; "
            "migrations are forward-only, an older release cannot run on it.",
        )
    changed = sorted(v for v, checksum in applied.items() if known[v].checksum != checksum)
    if changed:
        raise SchemaVersionError(
            f"schema migration {changed[0]} of the PostgreSQL durable store differs from the one "
            "applied to this database",
            hint="A released migration must never be edited: restore it and add a new version instead.",
        )
