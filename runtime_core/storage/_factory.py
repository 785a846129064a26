"""open_durable_store: build the backend that DurableStoreSettings selects.

Owns only the choice of backend. Must not hold any state.
"""

from __future__ import annotations

from runtime_core.storage._mongo import MongoDurableStore
from runtime_core.storage._postgres import PostgresDurableStore
from runtime_core.storage._protocol import DurableStore
from runtime_core.storage._settings import DurableStoreSettings
from runtime_core.storage._sqlite import SqliteDurableStore


async def open_durable_store(settings: DurableStoreSettings) -> DurableStore:
    """Open the configured store, creating tables / indexes (PostgreSQL: migrating its schema);
    StoreUnavailableError if unreachable, SchemaVersionError if the database is newer than the code."""
    if settings.backend == "mongodb":
        assert settings.mongodb_uri is not None  # guaranteed by DurableStoreSettings validation
        return await MongoDurableStore.open(
            settings.mongodb_uri.get_secret_value(), settings.mongodb_database, settings.mongodb_timeout_ms
        )
    if settings.backend == "postgresql":
        assert settings.postgresql_conninfo is not None  # guaranteed by DurableStoreSettings validation
        password = settings.postgresql_password
        return await PostgresDurableStore.open(
            settings.postgresql_conninfo,
            password.get_secret_value() if password else None,
            min_size=settings.postgresql_pool_min_size,
            max_size=settings.postgresql_pool_max_size,
            timeout_ms=settings.postgresql_timeout_ms,
        )
    assert settings.sqlite_path is not None  # guaranteed by DurableStoreSettings validation
    return await SqliteDurableStore.open(settings.sqlite_path, settings.sqlite_busy_timeout_ms)
