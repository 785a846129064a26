"""Context-variable holder for the current ExecutionContextSnapshot."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from runtime_core.errors import MissingSnapshotError
from runtime_core.identity._snapshot import ExecutionContextSnapshot

_current: ContextVar[ExecutionContextSnapshot | None] = ContextVar("execution_context", default=None)


def current_snapshot() -> ExecutionContextSnapshot | None:
    return _current.get()


def require_snapshot() -> ExecutionContextSnapshot:
    snapshot = _current.get()
    if snapshot is None:
        raise MissingSnapshotError(
            "No ExecutionContextSnapshot is active for this operation.",
            hint="Restore the run's stored snapshot with restored_snapshot(...) first.",
        )
    return snapshot


@contextmanager
def restored_snapshot(snapshot: ExecutionContextSnapshot | None) -> Iterator[ExecutionContextSnapshot | None]:
    """Make `snapshot` current; on exit the previous value comes back (or None: cleared)."""
    token = _current.set(snapshot)
    try:
        yield snapshot
    finally:
        _current.reset(token)
