"""Span ids that can be chosen in advance: the run span is allocated at submit and recorded later.

Owns `PinnableIdGenerator` (random ids, except inside `pinned_ids(...)`, where the next span
(and, for a root span, trace) gets the given id) and `new_span_id` / `new_trace_id` in W3C hex.
A run's `invoke_workflow` span is only known to be over when its execution finalizes, maybe in
another process; its id is fixed at submit so every dispatch and step can name it as parent.
Must not create spans.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

_pinned: ContextVar[tuple[int, int] | None] = ContextVar("pinned_span_ids", default=None)


def new_span_id() -> str:
    """16 lowercase hex digits, never all zero (W3C span id)."""
    value = secrets.token_hex(8)
    return value if value.strip("0") else new_span_id()


def new_trace_id() -> str:
    """32 lowercase hex digits, never all zero (W3C trace id)."""
    value = secrets.token_hex(16)
    return value if value.strip("0") else new_trace_id()


@contextmanager
def pinned_ids(trace_id: str, span_id: str) -> Iterator[None]:
    """The span started inside gets `span_id` (and `trace_id` when it is a root span)."""
    token = _pinned.set((int(trace_id, 16), int(span_id, 16)))
    try:
        yield
    finally:
        _pinned.reset(token)


class PinnableIdGenerator(IdGenerator):
    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        pinned = _pinned.get()
        return pinned[1] if pinned is not None else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        pinned = _pinned.get()
        return pinned[0] if pinned is not None else self._random.generate_trace_id()

    def is_trace_id_random(self) -> bool:
        return True
