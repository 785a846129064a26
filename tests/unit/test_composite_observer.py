"""CompositeObserver: every observer hears every event in the order they were added, except an
observer declaring the `event_names` it acts on, which hears only those; a composite wants the
terminal view of a finalized execution when an observer within it does."""

from __future__ import annotations

from runtime_core.dag import CompositeObserver, EngineEvent
from runtime_core.dag._events import wants_final_view


class Heard:
    def __init__(self, log: list[tuple[str, str]], label: str) -> None:
        self.log, self.label = log, label

    async def on_event(self, event: EngineEvent) -> None:
        self.log.append((self.label, event.name))


class FinalizedOnly(Heard):
    event_names = frozenset({"execution.finalized"})


async def test_observers_hear_events_in_order_and_a_declared_one_only_its_names() -> None:
    log: list[tuple[str, str]] = []
    composite = CompositeObserver(Heard(log, "all"), FinalizedOnly(log, "final"))
    composite.add(Heard(log, "added"))
    for name in ("step.claimed", "execution.finalized"):
        await composite.on_event(EngineEvent(name, "exec_1", None))
    assert log == [
        ("all", "step.claimed"),
        ("added", "step.claimed"),
        ("all", "execution.finalized"),
        ("final", "execution.finalized"),
        ("added", "execution.finalized"),
    ]
    assert [type(o).__name__ for o in composite.observers] == ["Heard", "FinalizedOnly", "Heard"]


class WantsView(Heard):
    wants_final_view = True


def test_a_composite_wants_the_final_view_when_any_observer_within_it_does() -> None:
    log: list[tuple[str, str]] = []
    assert not wants_final_view(CompositeObserver(Heard(log, "a"), FinalizedOnly(log, "b")))
    nested = CompositeObserver(Heard(log, "a"), CompositeObserver(WantsView(log, "snapshots")))
    assert wants_final_view(nested)
