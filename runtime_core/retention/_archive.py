"""StepArchiver: the only writer of externalized payloads and archived steps.

Owns turning a result into a payload (canonical JSON bytes under a deterministic id) and
keeping a step's durable copy before retention removes anything from Redis. Must not touch
Redis: callers replace hot values only after these writes succeeded.
"""

from __future__ import annotations

import hashlib
from typing import Any

from runtime_core.retention._metrics import NullRetentionMetrics, RetentionMetrics
from runtime_core.retention._refs import (
    RESULT_CONTENT_TYPE,
    hot_ref,
    parse_hot_ref,
    payload_id_for,
    result_body,
)
from runtime_core.retention._resolver import PayloadResolver
from runtime_core.storage import ArchivedStep, DurableStore, PayloadRef


class StepArchiver:
    def __init__(
        self, store: DurableStore, resolver: PayloadResolver, metrics: RetentionMetrics | None = None
    ) -> None:
        self.store = store
        self.resolver = resolver
        self.metrics: RetentionMetrics = metrics or NullRetentionMetrics()

    async def externalize(
        self, execution_id: str, step_name: str, tenant_id: str, result: Any, body: bytes | None = None
    ) -> PayloadRef:
        """Store `result` (whose canonical bytes are `body`, if known) as a payload; return its ref."""
        body = body if body is not None else result_body(result)
        payload_id = payload_id_for(execution_id, step_name, hashlib.sha256(body).hexdigest())
        ref = await self.store.put_payload(
            payload_id, tenant_id, execution_id, step_name, body, RESULT_CONTENT_TYPE
        )
        self.resolver.remember(tenant_id, ref, result)
        self.metrics.payload_externalized(ref.size)
        return ref

    async def archive(
        self,
        execution_id: str,
        tenant_id: str,
        step_name: str,
        *,
        status: str,
        retry_count: int,
        stored: Any,
        externalize: bool,
    ) -> Any:
        """Keep a durable copy of a step; returns its stored form (a payload ref when externalized)."""
        ref = parse_hot_ref(stored)
        if ref is None and externalize:
            ref = await self.externalize(execution_id, step_name, tenant_id, stored)
        archived = ArchivedStep(
            execution_id=execution_id,
            tenant_id=tenant_id,
            step_name=step_name,
            status=status,
            retry_count=retry_count,
            result_ref=ref,
            result=stored if ref is None else None,
        )
        await self.store.archive_step(archived)
        return hot_ref(ref) if ref is not None else stored
