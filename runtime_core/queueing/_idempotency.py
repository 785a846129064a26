"""Idempotent submit: an idempotency key, the fingerprint of a request and its conflict error.

Owns what makes two submits "the same": the caller's tenant, the key and the fingerprint of
the request (sha256 of the canonical pipeline definition and input), plus the window the
key stays claimed. The claim itself is atomic with the run's creation (`shared_enqueue` /
`shared_run_transition` take the key as an optional KEYS entry). Must not create runs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.errors import ConflictError
from runtime_core.pipeline import PipelineDefinition

DEFAULT_IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000
MAX_IDEMPOTENCY_KEY_LENGTH = 255


class IdempotencyKey(BaseModel):
    """One submit's key: reusing it within `window_ms` in the same tenant returns the first run."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_LENGTH)
    fingerprint: str
    window_ms: int = Field(default=DEFAULT_IDEMPOTENCY_WINDOW_MS, ge=1)

    @classmethod
    def for_request(
        cls, key: str, pipeline: PipelineDefinition, input: dict[str, Any], *, window_ms: int
    ) -> IdempotencyKey:
        return cls(key=key, fingerprint=request_fingerprint(pipeline, input), window_ms=window_ms)


def request_fingerprint(pipeline: PipelineDefinition, input: dict[str, Any]) -> str:
    """sha256 of the canonical (sorted-keys) pipeline definition and input."""
    canonical = json.dumps(
        {"pipeline": pipeline.model_dump(mode="json", by_alias=True), "input": input},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class IdempotencyConflictError(ConflictError):
    """The key was already used, within its window, for a different pipeline or input."""

    code = "idempotency_conflict"

    def __init__(self, key: str, shared_run_id: str) -> None:
        super().__init__(
            f"Idempotency key '{key}' was already used in your tenant for a different pipeline or "
            f"input (it created run '{shared_run_id}'); nothing was submitted.",
            hint="Send the same pipeline and input again to get that run back, or use a new "
            "idempotency key for a different request.",
        )
        self.shared_run_id = shared_run_id


class IdempotentRunGoneError(ConflictError):
    """The key's run is known by id only: its shared run record is no longer in hot state."""

    code = "idempotency_conflict"

    def __init__(self, key: str, shared_run_id: str) -> None:
        super().__init__(
            f"Idempotency key '{key}' already created run '{shared_run_id}', whose queue record has "
            "since been cleaned up; nothing was submitted.",
            hint=f"Read its outcome with run.status for run_id '{shared_run_id}'.",
        )
        self.key = key
        self.shared_run_id = shared_run_id
