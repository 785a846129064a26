"""Building the retrieval provider registry: the embedded SQLite demo source plus the configured entries.

Owns the kind -> provider class mapping and which keys the embedded source answers (those
the configuration does not take). Must not read files or the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runtime_core.steps.retrieval._http_json import HttpJsonRetrievalProvider
from runtime_core.steps.retrieval._mongodb import MongoRetrievalProvider
from runtime_core.steps.retrieval._postgres import PostgresRetrievalProvider
from runtime_core.steps.retrieval._provider import RetrievalProvider, RetrievalProviders
from runtime_core.steps.retrieval._settings import (
    HttpJsonSettings,
    MongoDbSettings,
    RetrievalProviderSettings,
)
from runtime_core.steps.retrieval._sqlite import (
    EMBEDDED_DATABASE_NAME,
    EMBEDDED_PROVIDER_TYPE,
    EMBEDDED_RELATIONAL_KEYS,
    SqliteRelationalProvider,
)


def build_retrieval_provider(name: str, settings: RetrievalProviderSettings) -> RetrievalProvider:
    if isinstance(settings, HttpJsonSettings):
        return HttpJsonRetrievalProvider(name, settings)
    if isinstance(settings, MongoDbSettings):
        return MongoRetrievalProvider(name, settings)
    return PostgresRetrievalProvider(name, settings)


def build_retrieval_providers(
    configured: Mapping[str, RetrievalProviderSettings] | None = None, data_dir: Path | None = None
) -> RetrievalProviders:
    """Each configured entry as (its provider_type, its name); the embedded source (in `data_dir`,
    or a temporary directory) keeps `relational/default` and `relational/sqlite` unless configured."""
    providers = RetrievalProviders()
    if data_dir is None:
        embedded = SqliteRelationalProvider.seeded_in_temporary_directory()
    else:
        embedded = SqliteRelationalProvider.seeded(data_dir / EMBEDDED_DATABASE_NAME)
    for provider_key in EMBEDDED_RELATIONAL_KEYS:
        providers.register(EMBEDDED_PROVIDER_TYPE, provider_key, embedded)
    for name, settings in (configured or {}).items():
        providers.register(settings.provider_type, name, build_retrieval_provider(name, settings))
    return providers
