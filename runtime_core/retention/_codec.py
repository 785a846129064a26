"""ExternalizingResultCodec: the engine's ResultCodec with payload externalization.

Owns the size threshold: a result whose canonical JSON is larger is stored as a payload and
only its reference goes to Redis. So is a result that merely looks like a reference: every
hot reference is one this codec wrote, a step cannot forge one. Decoding resolves references
(and evicted results) through the resolver and turns a resolver failure into a typed step
failure (code `resolver`) that follows the step's retry policy. Must not write Redis itself.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.errors import StoreUnavailableError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.retention._archive import StepArchiver
from runtime_core.retention._refs import hot_ref, parse_hot_ref, result_body, tenant_of
from runtime_core.retention._resolver import PayloadResolver, ResolverError
from runtime_core.steps import StepFailure

log = logging.getLogger("runtime_core.retention")

DEFAULT_THRESHOLD_BYTES = 16 * 1024
RESOLVER_FAILURE_CODE = "resolver"


class ExternalizationSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold_bytes: int = Field(default=DEFAULT_THRESHOLD_BYTES, ge=0)


class ExternalizingResultCodec:
    """Implements `runtime_core.dag.ResultCodec`."""

    def __init__(
        self,
        archiver: StepArchiver,
        resolver: PayloadResolver,
        settings: ExternalizationSettings | None = None,
    ) -> None:
        self.archiver = archiver
        self.resolver = resolver
        self.settings = settings or ExternalizationSettings()

    async def encode(
        self,
        execution_id: str,
        step_name: str,
        result: Any,
        snapshot: ExecutionContextSnapshot | None,
        *,
        text: str | None = None,
    ) -> Any:
        body = result_body(result) if text is None else text.encode("utf-8")
        if len(body) <= self.settings.threshold_bytes and parse_hot_ref(result) is None:
            return result
        try:
            ref = await self.archiver.externalize(execution_id, step_name, tenant_of(snapshot), result, body)
        except StoreUnavailableError:
            # Correctness over memory: keep the result inline until retention can move it.
            log.warning("payload.externalize_failed", extra={"execution_id": execution_id, "step": step_name})
            return result
        return hot_ref(ref)

    async def decode(
        self, execution_id: str, stored: dict[str, Any], snapshot: ExecutionContextSnapshot | None
    ) -> dict[str, Any]:
        try:
            return await self.resolver.resolve_many(execution_id, stored, tenant_of(snapshot))
        except ResolverError as exc:
            raise StepFailure(exc.message, code=RESOLVER_FAILURE_CODE) from exc
