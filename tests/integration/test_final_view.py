"""The terminal snapshot's read rides in the call that finalizes an execution: `advance`
with `final_view_of` reads the execution right after the script in the same round trip and
returns that view only when the call finalized it; the `execution.finalized` event carries it,
so the snapshot writer reads nothing itself."""

from __future__ import annotations

import secrets

import pytest

from runtime_core.dag import DagEngine, DagStore, EngineEvent, EngineSettings, ExecutionView, FirstClaim
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.policy import RetryEngine
from runtime_core.steps import default_executor_registry

pytestmark = pytest.mark.redis_kinds("single", "cluster")

SNAPSHOT = ExecutionContextSnapshot(user_id="u-1", tenant_id="tenant-a")
TWO_STEPS = parse_pipeline(
    {
        "name": "two",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
        ],
    }
)
CLAIM = {"lease_ms": 60_000, "token_prefix": "t", "finalize": True}


class ReadCountingStore(DagStore):
    reads = 0

    async def read_execution(self, execution_id: str) -> ExecutionView | None:
        self.reads += 1
        return await super().read_execution(execution_id)


class Finalized:
    wants_final_view = True  # as the snapshot writer does

    def __init__(self) -> None:
        self.events: list[EngineEvent] = []

    async def on_event(self, event: EngineEvent) -> None:
        if event.name == "execution.finalized":
            self.events.append(event)


async def test_only_the_finalizing_call_returns_the_view_it_read(hot_state: HotState) -> None:
    store = DagStore(hot_state)
    execution_id = f"exec_{secrets.token_hex(8)}"
    first = FirstClaim(max_claim=1, lease_ms=60_000, token_prefix="f")
    _, created = await store.create_claiming(execution_id, TWO_STEPS, {}, SNAPSHOT, None, first)
    assert created is not None
    [a] = created.claims.claims

    middle = await store.advance(execution_id, [(a, {"a": 1})], max_claim=1, final_view_of=TWO_STEPS, **CLAIM)
    assert middle.finalization is None and middle.final_view is None  # not final: no view
    [b] = middle.claims.claims
    last = await store.advance(execution_id, [(b, {"b": 2})], max_claim=1, final_view_of=TWO_STEPS, **CLAIM)

    assert last.finalization is not None and last.finalization.status == "Completed"
    view = last.final_view
    assert view is not None
    assert view == await store.read_execution(execution_id)  # what a read of its own would see
    assert view.meta.status == "Completed"
    assert [(s.name, s.status, s.result) for s in view.steps] == [
        ("a", "Completed", {"a": 1}),
        ("b", "Completed", {"b": 2}),
    ]


async def test_the_finalizing_completion_hands_its_view_to_the_event(
    hot_state: HotState,
) -> None:
    store = ReadCountingStore(hot_state)
    observer = Finalized()
    engine = DagEngine(
        store, default_executor_registry(), RetryEngine(), settings=EngineSettings(), observer=observer
    )
    execution_id = await engine.create_execution(TWO_STEPS, {}, SNAPSHOT, claim_first=True)

    assert await engine.run(execution_id, workers=1) == "Completed"

    [event] = observer.events
    assert event.view is not None and event.view.meta.status == "Completed"
    assert store.reads == 0
    assert event.view == await store.read_execution(execution_id)


class FinalizedWithoutView(Finalized):
    wants_final_view = False


async def test_without_an_observer_wanting_the_view_the_finalizing_call_reads_none(
    hot_state: HotState,
) -> None:
    store = ReadCountingStore(hot_state)
    observer = FinalizedWithoutView()
    engine = DagEngine(
        store, default_executor_registry(), RetryEngine(), settings=EngineSettings(), observer=observer
    )
    execution_id = await engine.create_execution(TWO_STEPS, {}, SNAPSHOT, claim_first=True)

    assert await engine.run(execution_id, workers=1) == "Completed"

    [event] = observer.events
    assert event.view is None and store.reads == 0  # nobody read the whole execution
