"""The hot-state reference to an externalized payload, and how payload ids are derived.

Owns the `{"$payloadRef": id, "size": n, "sha256": h}` object kept in Redis in place of a
large result, the deterministic payload id and the tenant key of durable rows. Must not
perform any I/O.
"""

from __future__ import annotations

import hashlib
from typing import Any

from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.steps import canonical_json
from runtime_core.storage import PayloadRef

REF_MARKER = "$payloadRef"
RESULT_CONTENT_TYPE = "application/json"
NO_TENANT = ""


def tenant_of(snapshot: ExecutionContextSnapshot | None) -> str:
    """The durable tenant key of an execution: only ever its snapshot's tenant."""
    return snapshot.tenant_id if snapshot is not None else NO_TENANT


def result_body(result: Any) -> bytes:
    """The stored bytes of a result: its canonical JSON (its sha256 is the fingerprint's)."""
    return canonical_json(result).encode("utf-8")


def payload_id_for(execution_id: str, step_name: str, body_sha256: str) -> str:
    """Same execution, step and content -> same id, so a re-encoded result is an idempotent upsert."""
    digest = hashlib.sha256(f"{execution_id}\0{step_name}\0{body_sha256}".encode()).hexdigest()
    return f"pay_{digest[:40]}"


def hot_ref(ref: PayloadRef) -> dict[str, Any]:
    return {REF_MARKER: ref.payload_id, "sha256": ref.sha256, "size": ref.size}


def parse_hot_ref(value: Any) -> PayloadRef | None:
    """The PayloadRef a hot value stands for, or None when the value is an inline result."""
    if not isinstance(value, dict) or set(value) != {REF_MARKER, "sha256", "size"}:
        return None
    return PayloadRef(payload_id=value[REF_MARKER], size=value["size"], sha256=value["sha256"])
