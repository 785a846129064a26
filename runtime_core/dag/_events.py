"""Engine events and the observer interface that ledger, trace and metrics implement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from runtime_core.identity import ExecutionContextSnapshot

if TYPE_CHECKING:
    from runtime_core.dag._records import ExecutionMeta, ExecutionView


@dataclass(slots=True)
class EngineEvent:
    """One thing that happened to an execution; `name` like `step.completed`.

    Every observer is handed the same event: none may change it (`dataclasses.replace` makes
    a changed copy). Not frozen: two are made per step, and a frozen dataclass's `__init__`
    (an `object.__setattr__` per field) costs four times a plain one's."""

    name: str
    execution_id: str
    snapshot: ExecutionContextSnapshot | None
    step_name: str | None = None
    worker_id: str | None = None
    # When it happened on the Redis clock, where the transition says (`execution.finalized`:
    # the finalization time stored with the execution); 0 when unknown.
    at_ms: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    # The execution's metadata as the engine holds it (stored at creation or read when its run
    # began: its `status` is not kept current), so observers need not read it back.
    meta: ExecutionMeta | None = None
    # `execution.finalized`: the terminal execution when it was read in the finalizing call
    # (the terminal snapshot needs no read of its own then); None otherwise.
    view: ExecutionView | None = None


LIVE_EVENTS = frozenset({"step.output"})
"""Events for live views only (a streaming step's partial output): never written to the ledger."""


class ExecutionObserver(Protocol):
    async def on_event(self, event: EngineEvent) -> None: ...


def wants_final_view(observer: ExecutionObserver) -> bool:
    """Whether an observer uses the terminal view an `execution.finalized` event can carry
    (it says so with `wants_final_view`): only then does the finalizing call read the whole
    execution along with it (every step's row and result: a big run's read is not free)."""
    return bool(getattr(observer, "wants_final_view", False))


def observed_names(observer: ExecutionObserver) -> frozenset[str] | None:
    """The event names an observer acts on, when it declares them (`event_names`); None: all.
    A `CompositeObserver` hands it only those (most events are steps' own, two per step)."""
    return getattr(observer, "event_names", None)


class NullObserver:
    async def on_event(self, event: EngineEvent) -> None:
        return None


class CompositeObserver:
    """Fans one event out to several observers in order (to an observer declaring the
    `event_names` it acts on, only those)."""

    def __init__(self, *observers: ExecutionObserver) -> None:
        self.observers: list[ExecutionObserver] = []
        self._routes: list[tuple[ExecutionObserver, frozenset[str] | None]] = []
        for observer in observers:
            self.add(observer)

    def add(self, observer: ExecutionObserver) -> None:
        self.observers.append(observer)
        self._routes.append((observer, observed_names(observer)))

    @property
    def wants_final_view(self) -> bool:
        return any(wants_final_view(observer) for observer in self.observers)

    async def on_event(self, event: EngineEvent) -> None:
        name = event.name
        for observer, names in self._routes:
            if names is None or name in names:
                await observer.on_event(event)
