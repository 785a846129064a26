"""Shaping step results: canonical JSON values and the `{"data": ..., **meta}` envelope.

Owns key ordering and hashing so every executor produces byte-identical output for equal
inputs. Must not know about any particular step type.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(value: Any) -> Any:
    """Return `value` with every dict's keys sorted (recursively) and tuples turned into lists."""
    if isinstance(value, dict):
        return {str(key): canonical(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    return value


# Built once: `json.dumps` with options builds an encoder per call (a terminal fingerprint
# hashes every step's result: 9,002 calls at the end of a wide run). It keeps no state.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON: the form hashed and compared for determinism."""
    return _CANONICAL_ENCODER.encode(value)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def step_result(data: Any, **meta: Any) -> dict[str, Any]:
    """The result envelope: `data` first (what bindings like `steps.x.result.data` read), then meta."""
    return {"data": canonical(data), **canonical(meta)}


def unwrap_result(value: Any) -> Any:
    """The `data` of an upstream step result, or `value` itself when it is not an envelope."""
    if isinstance(value, dict) and "data" in value:
        return value["data"]
    return value


def result_usage(result: Any) -> dict[str, Any] | None:
    """The `usage` meta of a result envelope (what the step consumed, e.g. LLM tokens), if any."""
    if isinstance(result, dict) and isinstance(result.get("usage"), dict):
        return result["usage"]
    return None


def usage_attributes(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Event attributes carrying `usage` to the ledger and metrics; none when nothing was consumed."""
    return {"usage": usage} if usage else {}
