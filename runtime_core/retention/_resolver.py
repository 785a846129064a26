"""PayloadResolver: rehydrates step results, layer by layer.

Owns the resolution order Redis value -> in-process LRU -> durable index (archived steps)
-> payload store, the sha256 check of every payload it loads, and `ResolverError`. Must not
write anything to Redis or to the durable store.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable
from enum import StrEnum
from typing import Any, TypeVar

from runtime_core.errors import RuntimeCoreError, StoreUnavailableError
from runtime_core.retention._cache import PayloadCache
from runtime_core.retention._metrics import NullRetentionMetrics, RetentionMetrics
from runtime_core.retention._refs import hot_ref, parse_hot_ref
from runtime_core.storage import ArchivedStep, DurableStore, PayloadCorruptedError, PayloadRef

T = TypeVar("T")
_ARCHIVE_ENTRY_BYTES = 256  # what an archived stored form (inline small value or ref) costs the LRU
_ARCHIVED_ONE_BY_ONE = 16  # more missing results than this: the archive is read in one query


class ResolverLayer(StrEnum):
    REDIS = "redis"
    CACHE = "cache"
    ARCHIVE = "archive"
    PAYLOAD = "payload"


class ResolverError(RuntimeCoreError):
    """A result could not be rehydrated: its payload is missing, corrupted or unreachable."""

    code = "resolver"

    def __init__(self, execution_id: str, step_name: str, reason: str, detail: str) -> None:
        super().__init__(
            f"Cannot resolve the result of step '{step_name}' of {execution_id}: {detail}",
            hint="The step follows its retry policy; restore the payload or replay the producing step.",
        )
        self.execution_id = execution_id
        self.step_name = step_name
        self.reason = reason


class PayloadResolver:
    """Turns stored forms (inline values or payload refs) back into results."""

    def __init__(
        self,
        store: DurableStore,
        cache: PayloadCache | None = None,
        metrics: RetentionMetrics | None = None,
    ) -> None:
        self.store = store
        self.cache = cache if cache is not None else PayloadCache()
        self.metrics: RetentionMetrics = metrics or NullRetentionMetrics()

    def remember(self, tenant_id: str, ref: PayloadRef, value: Any) -> None:
        """Prime the LRU with a value the caller already holds (the codec after externalizing)."""
        self.cache.put(_payload_key(tenant_id, ref.payload_id), value, ref.size)

    async def resolve_many(
        self, execution_id: str, hot_values: dict[str, Any], tenant_id: str
    ) -> dict[str, Any]:
        """Resolve every step's hot value (None = not in Redis) into its result."""
        if not hot_values:
            return {}
        started = time.perf_counter()
        stored = await self.stored_forms(execution_id, hot_values, tenant_id)
        resolved = {
            name: await self.resolve_stored(execution_id, name, value, tenant_id)
            for name, value in stored.items()
        }
        self.metrics.resolver_latency(time.perf_counter() - started)
        return resolved

    async def stored_forms(
        self, execution_id: str, hot_values: dict[str, Any], tenant_id: str
    ) -> dict[str, Any]:
        """Hot values, with a value missing from Redis replaced by its archived stored form."""
        stored = dict(hot_values)
        missing = [name for name, value in hot_values.items() if value is None]
        if len(missing) > _ARCHIVED_ONE_BY_ONE:  # many evicted results: one read of the archive
            archived = await self._guarded(
                execution_id, "*", self.store.list_archived_steps(execution_id, tenant_id)
            )
            forms = {step.step_name: _stored_form(step) for step in archived}
            for name in missing:
                stored[name] = forms.get(name)
                if name in forms:
                    self.metrics.resolver_hit(ResolverLayer.ARCHIVE)
            return stored
        for name in missing:
            stored[name] = await self._archived_form(execution_id, name, tenant_id)
        return stored

    async def resolve_stored(self, execution_id: str, step_name: str, value: Any, tenant_id: str) -> Any:
        ref = parse_hot_ref(value)
        if ref is None:
            self.metrics.resolver_hit(ResolverLayer.REDIS)
            return value
        hit, cached = self.cache.get(_payload_key(tenant_id, ref.payload_id))
        if hit:
            self.metrics.resolver_hit(ResolverLayer.CACHE)
            return cached
        result = await self._load_payload(execution_id, step_name, ref, tenant_id)
        self.metrics.resolver_hit(ResolverLayer.PAYLOAD)
        self.remember(tenant_id, ref, result)
        return result

    async def _archived_form(self, execution_id: str, step_name: str, tenant_id: str) -> Any:
        key = f"archive:{tenant_id}:{execution_id}:{step_name}"
        hit, cached = self.cache.get(key)
        if hit:
            self.metrics.resolver_hit(ResolverLayer.CACHE)
            return cached
        archived = await self._guarded(
            execution_id, step_name, self.store.get_archived_step(execution_id, step_name, tenant_id)
        )
        if archived is None:
            return None
        self.metrics.resolver_hit(ResolverLayer.ARCHIVE)
        form = _stored_form(archived)
        self.cache.put(key, form, _ARCHIVE_ENTRY_BYTES)
        return form

    async def _load_payload(self, execution_id: str, step_name: str, ref: PayloadRef, tenant_id: str) -> Any:
        try:
            body = await self._guarded(
                execution_id, step_name, self.store.get_payload(ref.payload_id, tenant_id)
            )
        except PayloadCorruptedError as exc:
            raise self._failure(execution_id, step_name, "corrupted", exc.message) from exc
        if body is None:
            raise self._failure(execution_id, step_name, "missing", f"payload {ref.payload_id} is missing")
        if hashlib.sha256(body).hexdigest() != ref.sha256:
            raise self._failure(
                execution_id, step_name, "corrupted", f"payload {ref.payload_id} does not match its reference"
            )
        try:
            return json.loads(body)
        except ValueError as exc:
            raise self._failure(
                execution_id, step_name, "corrupted", f"payload {ref.payload_id}: {exc}"
            ) from exc

    async def _guarded(self, execution_id: str, step_name: str, read: Awaitable[T]) -> T:
        try:
            return await read
        except StoreUnavailableError as exc:
            raise self._failure(execution_id, step_name, "unavailable", exc.message) from exc

    def _failure(self, execution_id: str, step_name: str, reason: str, detail: str) -> ResolverError:
        self.metrics.resolver_failure(reason)
        return ResolverError(execution_id, step_name, reason, detail)


def _payload_key(tenant_id: str, payload_id: str) -> str:
    return f"payload:{tenant_id}:{payload_id}"


def _stored_form(archived: ArchivedStep) -> Any:
    return hot_ref(archived.result_ref) if archived.result_ref is not None else archived.result
