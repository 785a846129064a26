"""Encoding helpers shared by the backends: payload digests and sortable UTC timestamps.

Must not perform any I/O.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from runtime_core.storage._errors import PayloadCorruptedError
from runtime_core.storage._models import PayloadRef


def payload_ref(payload_id: str, body: bytes) -> PayloadRef:
    return PayloadRef(payload_id=payload_id, size=len(body), sha256=hashlib.sha256(body).hexdigest())


def verified_body(payload_id: str, body: bytes, expected_sha256: str) -> bytes:
    actual = hashlib.sha256(body).hexdigest()
    if actual != expected_sha256:
        raise PayloadCorruptedError(payload_id, expected_sha256, actual)
    return body


def sortable_timestamp(value: datetime) -> str:
    """Fixed-width ISO-8601 UTC text: lexical order equals time order."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
