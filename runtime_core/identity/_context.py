"""Context-variable holder for the current ExecutionContextSnapshot."""

from __future__ import annotations

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


def restored_snapshot(snapshot: ExecutionContextSnapshot | None) -> RestoredSnapshot:
    """Make `snapshot` current; on exit the previous value comes back (or None: cleared)."""
    return RestoredSnapshot(snapshot)


class RestoredSnapshot:
    """`with restored_snapshot(s) as current:` (entered around every step the engine runs: a
    plain class, not a generator, costs a fraction of `contextlib.contextmanager`'s)."""

    __slots__ = ("_snapshot", "_token")

    def __init__(self, snapshot: ExecutionContextSnapshot | None) -> None:
        self._snapshot = snapshot

    def __enter__(self) -> ExecutionContextSnapshot | None:
        self._token = _current.set(self._snapshot)
        return self._snapshot

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._token)
