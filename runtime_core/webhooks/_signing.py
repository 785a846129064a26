"""Signing a webhook body: HMAC-SHA256 over `<timestamp>.<body>`, sent as `t=...,v1=...`.

Owns the signature header (`MCP-Runtime-Signature: t=<unix seconds>,v1=<hex digest>`, the
scheme Stripe uses: the timestamp is signed with the body, so a captured request cannot be
replayed later than the receiver's tolerance) and its verification, which receivers can
copy (docs/mcp.md, "Verifying a webhook"). The secret never leaves these functions.
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "MCP-Runtime-Signature"
DEFAULT_TOLERANCE_S = 300


def signature_header(secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify_signature(
    secret: str, body: bytes, header: str, *, tolerance_s: int = DEFAULT_TOLERANCE_S, now: float | None = None
) -> bool:
    """True when `header` signs `body` with `secret` and its timestamp is within the tolerance."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        return False
    expected = signature_header(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))
