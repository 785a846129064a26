"""Strict-JSON and size limits of what callers submit: pipelines, run inputs, step results.

Owns the limits (pipeline document and step count, run input, step result, nesting depth) and
the checks that turn a value that is not strict JSON (NaN / Infinity, a non-JSON object, a
lone surrogate, nesting deeper than the limit) into `InvalidPipelineError` and an oversized
one into `InputTooLargeError`, before anything is stored. The pipeline limits are the
process's (`PipelineLimits`, from MCP_RUNTIME_MAX_PIPELINE_STEPS / _BYTES, set at start):
raise them on every process that submits or runs the pipelines. Must not touch Redis.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring
from typing import Any

from runtime_core.errors import ConfigurationError, InputTooLargeError, InvalidPipelineError

MIB = 1024 * 1024
MAX_PIPELINE_BYTES = 4 * MIB
MAX_STEPS = 10_000
MAX_STEPS_ENV = "MCP_RUNTIME_MAX_PIPELINE_STEPS"
MAX_BYTES_ENV = "MCP_RUNTIME_MAX_PIPELINE_BYTES"
DEFAULT_MAX_INPUT_BYTES = 1 * MIB
DEFAULT_MAX_RESULT_BYTES = 8 * MIB
MAX_JSON_DEPTH = 64


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads_strict(text: str | bytes, what: str) -> Any:
    """`json.loads` that refuses NaN / Infinity and reports every failure as InvalidPipelineError."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidPipelineError(
            "json", f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from exc
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidPipelineError("json", f"{what} is not valid JSON: {exc}.") from exc


def dumps_strict(value: Any, what: str) -> bytes:
    """UTF-8 strict JSON of `value` (the bytes that would be stored), or InvalidPipelineError."""
    return encoded_strict(value, what)[1]


class _StrictEncoder(json.JSONEncoder):
    """The strict compact form. `encode` calls the C encoder directly: `JSONEncoder.encode`
    goes through `iterencode`, which builds a Python float formatter per call that the C
    encoder never uses (a step's result is encoded once per step)."""

    def __init__(self, *, sort_keys: bool) -> None:
        super().__init__(allow_nan=False, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)

    def encode(self, o: Any) -> str:
        if c_make_encoder is None:  # no C accelerator: the standard path
            return super().encode(o)
        encode = c_make_encoder(
            {}, self.default, encode_basestring, None, ":", ",", self.sort_keys, False, False
        )
        return "".join(encode(o, 0))


# Built once (`json.dumps` with options builds an encoder per call): the strict compact form,
# unsorted and key-sorted (canonical). An encoder keeps no state between calls.
_STRICT_ENCODERS = {sort_keys: _StrictEncoder(sort_keys=sort_keys) for sort_keys in (False, True)}


def encoded_strict(value: Any, what: str, *, sort_keys: bool = False) -> tuple[str, bytes]:
    """Strict compact JSON of `value` as text and as its UTF-8 bytes (keys sorted: the canonical
    form), or InvalidPipelineError (nesting deeper than the limit is the reason given first)."""
    try:
        text = _STRICT_ENCODERS[sort_keys].encode(value)
        encoded = text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as exc:
        check_depth(value, what)
        raise InvalidPipelineError(
            "json", f"{what} is not JSON-serialisable: {exc}.", hint="Send plain JSON values only."
        ) from exc
    # Every level of nesting opens a bracket in the text: with no more brackets than the limit
    # (most values) nothing can nest deeper, and the walk over the value is not needed.
    if text.count("{") + text.count("[") > MAX_JSON_DEPTH:
        check_depth(value, what)
    return text, encoded


def check_depth(value: Any, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Nesting of objects / arrays at most `limit` levels (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict | list | tuple):
            continue
        if depth > limit:
            raise InvalidPipelineError(
                "json", f"{what} nests deeper than {limit} levels.", hint="Flatten the structure."
            )
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children)


def check_size(size_bytes: int, limit: int, what: str) -> None:
    if size_bytes > limit:
        raise InputTooLargeError(
            f"{what} is {size_bytes} bytes; the limit is {limit} bytes. Nothing was stored.",
            hint="Send a smaller value, or store large data elsewhere and pass a reference.",
        )


def text_size(raw: str | bytes) -> int:
    return len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class PipelineLimits:
    """How big a pipeline this process accepts: its steps and its JSON document's bytes."""

    max_steps: int = MAX_STEPS
    max_bytes: int = MAX_PIPELINE_BYTES

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> PipelineLimits:
        return cls(
            max_steps=_positive(env, MAX_STEPS_ENV, MAX_STEPS),
            max_bytes=_positive(env, MAX_BYTES_ENV, MAX_PIPELINE_BYTES),
        )


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip().replace("_", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(
            f"{name}={env[name]!r} is not a positive whole number.", hint=f"Unset it (default {default})."
        )
    return int(raw)


_limits = [PipelineLimits()]


def pipeline_limits() -> PipelineLimits:
    """The limits this process applies to pipelines submitted or validated now."""
    return _limits[0]


def set_pipeline_limits(limits: PipelineLimits) -> None:
    """Apply `limits` from now on (a runtime sets the ones of its settings as it starts)."""
    _limits[0] = limits
