"""The MongoDB retrieval provider: named operations as `find` with a filter built from bound inputs.

Owns the `pymongo.AsyncMongoClient` (opened on first use, closed with the provider), building
the filter (each `{"$param": name}` leaf of the configured template becomes that input's
value; inputs are scalars or lists of scalars, so they can never inject an operator), the
documents as JSON values, and classifying driver errors (unreachable `transient`, time
limit `timeout`, anything else `permanent`). Must never put the URI in a message.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pymongo import AsyncMongoClient
from pymongo.errors import ConnectionFailure, ExecutionTimeout, PyMongoError

from runtime_core.steps._executor import StepFailure
from runtime_core.steps._http_endpoint import secret_from_env
from runtime_core.steps._http_failures import redact
from runtime_core.steps.retrieval._operations import bound_values, jsonable, operation_spec, shaped
from runtime_core.steps.retrieval._settings import PARAM_MARKER, MongoDbSettings


class MongoRetrievalProvider:
    def __init__(self, name: str, settings: MongoDbSettings) -> None:
        self.name = name
        self.settings = settings
        self.operations = tuple(sorted(settings.operations))
        self._client: AsyncMongoClient[dict[str, Any]] | None = None
        self._uri = ""

    async def retrieve(self, operation: str, params: dict[str, Any]) -> dict[str, Any] | list[Any]:
        spec = operation_spec(f"MongoDB provider {self.name!r}", self.settings.operations, operation)
        values = bound_values(operation, spec.params, params)
        try:
            collection = self._open()[self.settings.database][spec.collection]
            cursor = collection.find(
                bound_filter(spec.filter, values), spec.projection, sort=spec.sort or None, limit=spec.limit
            )
            documents = await cursor.to_list(length=spec.limit)
        except PyMongoError as error:
            raise self._failure(operation, error) from None
        return shaped(operation, [jsonable(document) for document in documents], spec.result, values)

    def _open(self) -> AsyncMongoClient[dict[str, Any]]:
        if self._client is None:
            self._uri = secret_from_env(self.settings.uri_env, f"the URI of MongoDB provider {self.name!r}")
            self._client = AsyncMongoClient(
                self._uri, serverSelectionTimeoutMS=self.settings.server_selection_timeout_ms
            )
        return self._client

    def _failure(self, operation: str, error: PyMongoError) -> StepFailure:
        if isinstance(error, ExecutionTimeout):
            code = "timeout"
        elif isinstance(error, ConnectionFailure):
            code = "transient"
        else:
            code = "permanent"
        text = redact(f"{type(error).__name__}: {error}", [self._uri, urlsplit(self._uri).password or ""])
        return StepFailure(f"MongoDB provider {self.name!r}, operation {operation!r}: {text}", code=code)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def bound_filter(template: Any, values: dict[str, Any]) -> Any:
    """`template` with every `{"$param": name}` replaced by `values[name]` (already checked bindable)."""
    if isinstance(template, dict):
        if set(template) == {PARAM_MARKER}:
            return values[str(template[PARAM_MARKER])]
        return {key: bound_filter(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [bound_filter(value, values) for value in template]
    return template
