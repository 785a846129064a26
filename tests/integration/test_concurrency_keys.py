"""Issue 30.3: per-key concurrency (docs/flow-control.md), enforced in Lua in the tenant's queue
partition across processes: at most `limit` runs per key value hold a slot, from admission
until they end, whatever way they end; each strategy as documented. Runs on a single node and
on the 3-master cluster.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.errors import InvalidArgumentError
from runtime_core.flow import ConcurrencyKey, ConcurrencyStrategy
from runtime_core.hot_state import HotState
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.queueing import QueueItemStatus, SharedRunStatus, SubmitMode
from runtime_core.steps import StepFailure, StepInvocation
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    OTHER_SHARED_TENANT,
    GateExecutor,
    control_plane,
    start_instance,
)

pytestmark = pytest.mark.redis_kinds("single", "cluster")

BLOCKER = parse_pipeline({"name": "blocker", "steps": [{"name": "hold", "stepKey": "test.gate"}]})


def keyed(strategy: str = "queue", limit: int = 1, name: str = "keyed") -> PipelineDefinition:
    flow = {"concurrency": {"key": "input.customerId", "limit": limit, "strategy": strategy}}
    return parse_pipeline(
        {"name": name, "config": {"flow": flow}, "steps": [{"name": "work", "stepKey": "test.keyed"}]}
    )


class KeyedExecutor:
    """`test.keyed`: records start order and how many runs of each customer run at once; a run
    whose label is in `held` waits until released; `fail` labels fail permanently."""

    step_key = "test.keyed"

    def __init__(self, *held: str, fail: tuple[str, ...] = ()) -> None:
        self.started: list[str] = []
        self.ended: list[str] = []
        self.active: Counter[str] = Counter()
        self.max_active: Counter[str] = Counter()
        self.most_at_once = 0
        self.gates = {label: asyncio.Event() for label in held}
        self.fail = fail

    def release(self, label: str) -> None:
        self.gates[label].set()

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        customer, label = str(invocation.state["customerId"]), str(invocation.state.get("label", ""))
        self.started.append(label)
        self.active[customer] += 1
        self.max_active[customer] = max(self.max_active[customer], self.active[customer])
        self.most_at_once = max(self.most_at_once, sum(self.active.values()))
        try:
            if label in self.gates:
                await self.gates[label].wait()
            else:
                await asyncio.sleep(0.01)  # the step's work: long enough for another run to overlap
            if label in self.fail:
                raise StepFailure("injected failure", code="permanent")
        finally:
            self.active[customer] -= 1
            self.ended.append(label)
        return {"data": {"customer": customer}}


async def submit(
    plane: ControlPlane, pipeline: PipelineDefinition, customer: str, label: str = "", **options: Any
) -> str:
    result = await plane.submit(
        pipeline, {"customerId": customer, "label": label}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT, **options
    )
    return result.shared_run_id


async def ended(plane: ControlPlane, shared_run_id: str) -> str | None:
    """The run's final status once it has one (Completed, Failed, Cancelled)."""
    view = await plane.run_status(shared_run_id, DEFAULT_TENANT)
    if view.shared_status in ("Cancelled", "Rejected", "Failed") and view.local_status is None:
        return view.shared_status
    if view.local_status in ("Completed", "Failed", "Cancelled"):
        return view.local_status
    return None


async def all_ended(plane: ControlPlane, runs: list[str], timeout: float = 60) -> None:
    async def done() -> bool:
        return all([await ended(plane, run) is not None for run in runs])

    await wait_until(done, timeout=timeout, interval=0.05)


async def queue_status(plane: ControlPlane, shared_run_id: str) -> QueueItemStatus | None:
    item = await plane.parts.queue.item(shared_run_id)
    return item.status if item else None


async def running_plane(
    hot_state: HotState, executor: object, *, slots: int, host: str = "testhost"
) -> ControlPlane:
    plane = control_plane(hot_state, executor, GateExecutor(), background_pump=True, host=host)
    await start_instance(plane, max_concurrent_runs=slots, worker_count=slots)
    await plane.start()
    return plane


async def test_50_runs_over_5_keys_with_limit_1_never_run_two_of_one_key_at_once(hot_state: HotState) -> None:
    """Two control planes (each its pump and an instance with 4 run slots) share the queue; 50
    runs of 5 customers, submitted through both, all complete; never two of one customer at
    once, while runs of different customers did run together."""
    executor = KeyedExecutor()
    planes = [await running_plane(hot_state, executor, slots=4, host=f"keyhost{n}") for n in range(2)]
    try:
        pipeline = keyed()
        runs = await asyncio.gather(
            *(submit(planes[n % 2], pipeline, f"customer-{n % 5}", f"r{n}") for n in range(50))
        )
        await all_ended(planes[0], list(runs))
        assert [await ended(planes[0], run) for run in runs] == ["Completed"] * 50
        assert sorted(executor.started) == sorted(f"r{n}" for n in range(50))
        assert max(executor.max_active.values()) == 1
        assert executor.most_at_once > 1  # the limit is per key, not for the whole queue
    finally:
        for plane in planes:
            await plane.stop()


async def test_queue_strategy_holds_newer_runs_in_line_and_runs_them_in_order(hot_state: HotState) -> None:
    executor = KeyedExecutor("first")
    plane = await running_plane(hot_state, executor, slots=4)
    try:
        pipeline = keyed("queue")
        first = await submit(plane, pipeline, "c", "first")
        await wait_until(lambda: _started(executor, "first"))
        waiting = [await submit(plane, pipeline, "c", f"next-{n}") for n in range(3)]
        other = await submit(plane, pipeline, "other", "other")
        assert [await queue_status(plane, run) for run in waiting] == [QueueItemStatus.HELD] * 3
        await all_ended(plane, [other])  # another key is not held back
        executor.release("first")
        await all_ended(plane, [first, *waiting])
        assert executor.started == ["first", "other", "next-0", "next-1", "next-2"]
        assert executor.max_active["c"] == 1
    finally:
        await plane.stop()


async def test_cancel_newest_cancels_a_run_whose_key_is_full(hot_state: HotState) -> None:
    executor = KeyedExecutor("first")
    plane = await running_plane(hot_state, executor, slots=4)
    try:
        pipeline = keyed("cancel-newest")
        first = await submit(plane, pipeline, "c", "first")
        await wait_until(lambda: _started(executor, "first"))
        refused = await plane.submit(
            pipeline, {"customerId": "c", "label": "newest"}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT
        )
        assert refused.status is SharedRunStatus.CANCELLED and "cancel-newest" in refused.reason
        assert await ended(plane, refused.shared_run_id) == "Cancelled"
        executor.release("first")
        await all_ended(plane, [first])
        assert await ended(plane, first) == "Completed"
        # The slot went back with the run's end: the key takes a new run again.
        again = await submit(plane, pipeline, "c", "again")
        await all_ended(plane, [again])
        assert await ended(plane, again) == "Completed" and "newest" not in executor.started
    finally:
        await plane.stop()


async def test_cancel_in_progress_cancels_the_running_run_and_the_newest_wins(hot_state: HotState) -> None:
    executor = KeyedExecutor("first", "second")
    plane = await running_plane(hot_state, executor, slots=4)
    try:
        pipeline = keyed("cancel-in-progress")
        first = await submit(plane, pipeline, "c", "first")
        await wait_until(lambda: _started(executor, "first"))
        second = await submit(plane, pipeline, "c", "second")
        third = await submit(plane, pipeline, "c", "third")  # newer still: the second never runs
        executor.release("first")  # a cancelled step ends when its work returns
        await all_ended(plane, [first, second, third])
        assert await ended(plane, first) == "Cancelled"
        assert await ended(plane, second) == "Cancelled"
        assert await ended(plane, third) == "Completed"
        assert "second" not in executor.started and executor.max_active["c"] == 1
    finally:
        await plane.stop()


@pytest.mark.parametrize(
    ("strategy", "order"),
    [
        ("round-robin", ["a0", "b0", "a1", "b1", "a2", "b2"]),
        ("queue", ["a0", "a1", "a2", "b0", "b1", "b2"]),
    ],
)
async def test_round_robin_lets_waiting_keys_take_turns(
    hot_state: HotState, strategy: str, order: list[str]
) -> None:
    """One run slot, saturated while key a's three runs and then key b's three are queued: with
    round-robin a key whose slot frees joins the queue's tail, so the keys alternate; with the
    queue strategy a key's next run keeps its own (earlier) place."""
    executor, gate = KeyedExecutor(), GateExecutor()
    plane = control_plane(hot_state, executor, gate, background_pump=True)
    await start_instance(plane, max_concurrent_runs=1)
    try:
        await plane.start()
        await plane.submit(BLOCKER, {}, SubmitMode.QUEUE_FIRST, OTHER_SHARED_TENANT)
        await wait_until(lambda: _gate_started(gate))
        pipeline = keyed(strategy)
        runs = [await submit(plane, pipeline, key, f"{key}{n}") for key in "ab" for n in range(3)]
        gate.release()
        await all_ended(plane, runs)
        assert executor.started == order
    finally:
        await plane.stop()


async def test_a_slot_goes_back_however_a_run_ends(hot_state: HotState) -> None:
    """A run that fails, one cancelled while queued and one cancelled while waiting in line all
    give the key's slot (or place) back: the runs behind them still run, one at a time."""
    executor = KeyedExecutor("holder", fail=("fails",))
    plane = await running_plane(hot_state, executor, slots=4)
    try:
        pipeline = keyed()
        holder = await submit(plane, pipeline, "c", "holder")
        await wait_until(lambda: _started(executor, "holder"))
        fails, cancelled_held, last = [
            await submit(plane, pipeline, "c", label) for label in ("fails", "x", "last")
        ]
        await plane.cancel(cancelled_held, DEFAULT_TENANT)
        executor.release("holder")
        await all_ended(plane, [holder, fails, cancelled_held, last])
        assert [await ended(plane, run) for run in (holder, fails, cancelled_held, last)] == [
            "Completed",
            "Failed",
            "Cancelled",
            "Completed",
        ]
        assert executor.started == ["holder", "fails", "last"] and executor.max_active["c"] == 1
        k = plane.parts.queue.keys.of_tenant(DEFAULT_TENANT.tenant_id)
        assert (
            await hot_state.redis.zcard(k.flow_admitted) == 0
            and await hot_state.redis.hlen(k.flow_slots) == 0
        )
    finally:
        await plane.stop()


async def test_a_submit_may_declare_the_key_and_a_missing_key_is_refused(hot_state: HotState) -> None:
    executor = KeyedExecutor("first")
    plane = await running_plane(hot_state, executor, slots=4)
    plain = parse_pipeline({"name": "plain", "steps": [{"name": "work", "stepKey": "test.keyed"}]})
    declared = ConcurrencyKey(key="input.customerId", limit=1, strategy=ConcurrencyStrategy.QUEUE)
    try:
        first = await submit(plane, plain, "c", "first", concurrency=declared)
        await wait_until(lambda: _started(executor, "first"))
        second = await submit(plane, plain, "c", "second", concurrency=declared)
        assert await queue_status(plane, second) is QueueItemStatus.HELD
        with pytest.raises(InvalidArgumentError, match=r"input\.customerId has no value"):
            await plane.submit(keyed(), {"label": "no key"}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        executor.release("first")
        await all_ended(plane, [first, second])
        assert await plane.parts.queue.pending_count() == 0
    finally:
        await plane.stop()


async def _started(executor: KeyedExecutor, label: str) -> bool:
    return label in executor.started


async def _gate_started(gate: GateExecutor) -> bool:
    return gate.started == 1
