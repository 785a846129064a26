"""Open step attempts keyed by (execution, step, worker), as the trace and the metrics track them.

Owns the key of an attempt and finding the attempt an outcome event closes, including
`step.parked`, which carries no worker id (the step's only open attempt then). Must not do I/O.
"""

from __future__ import annotations

from typing import TypeVar

from runtime_core.dag import EngineEvent

AttemptKey = tuple[str, str | None, str | None]

_V = TypeVar("_V")


def attempt_key(event: EngineEvent) -> AttemptKey:
    return (event.execution_id, event.step_name, event.worker_id)


def pop_attempt(open_attempts: dict[AttemptKey, _V], event: EngineEvent) -> _V | None:
    """Remove and return the attempt `event` closes, or None when none is open."""
    opened = open_attempts.pop(attempt_key(event), None)
    if opened is None and event.worker_id is None:
        key = next((k for k in open_attempts if k[:2] == (event.execution_id, event.step_name)), None)
        opened = open_attempts.pop(key) if key is not None else None
    return opened


def forget_execution(open_attempts: dict[AttemptKey, _V], execution_id: str) -> None:
    for key in [key for key in open_attempts if key[0] == execution_id]:
        del open_attempts[key]
