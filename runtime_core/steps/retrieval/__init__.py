"""Retrieval providers for `rag.retrieval`: contract, registry, the embedded default and the real ones.

Owns reading data sources by named operation: the embedded SQLite demo source (offline
default), PostgreSQL (psycopg 3 async pool, parameterized SQL), HTTP JSON APIs (templated
path, bound query / body) and MongoDB (`find` with a filter of bound inputs), configured by
name with their secrets read from environment variables. Must not shape step results
(`rag.retrieval` does) or know about pipelines.
"""

from runtime_core.steps.retrieval._build import build_retrieval_provider, build_retrieval_providers
from runtime_core.steps.retrieval._http_json import HttpJsonRetrievalProvider
from runtime_core.steps.retrieval._mongodb import MongoRetrievalProvider, bound_filter
from runtime_core.steps.retrieval._operations import ResultShape, bound_values, jsonable
from runtime_core.steps.retrieval._postgres import PostgresRetrievalProvider
from runtime_core.steps.retrieval._provider import RetrievalProvider, RetrievalProviders
from runtime_core.steps.retrieval._settings import (
    HttpJsonSettings,
    HttpOperation,
    MongoDbSettings,
    MongoOperation,
    PostgresSettings,
    RetrievalProviderSettings,
    SqlOperation,
)
from runtime_core.steps.retrieval._sqlite import (
    EMBEDDED_PROVIDER_TYPE,
    EMBEDDED_RELATIONAL_KEYS,
    SEED_SQL_PATH,
    SqliteRelationalProvider,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Contract and registry
    "RetrievalProvider",
    "RetrievalProviders",
    "build_retrieval_provider",
    "build_retrieval_providers",
    # Embedded default
    "SqliteRelationalProvider",
    "EMBEDDED_PROVIDER_TYPE",
    "EMBEDDED_RELATIONAL_KEYS",
    "SEED_SQL_PATH",
    # Configured sources and their settings
    "RetrievalProviderSettings",
    "PostgresRetrievalProvider",
    "PostgresSettings",
    "SqlOperation",
    "HttpJsonRetrievalProvider",
    "HttpJsonSettings",
    "HttpOperation",
    "MongoRetrievalProvider",
    "MongoDbSettings",
    "MongoOperation",
    # Binding inputs and shaping rows
    "ResultShape",
    "bound_values",
    "bound_filter",
    "jsonable",
]
