"""The ledger of one shared run reads submitted -> queued -> dispatched -> execution events."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.errors import ConflictError, StoreUnavailableError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import QueueItemStatus, QueueTransition, RetireOutcome, SubmitMode
from tests.helpers import wait_until

ONE_STEP = parse_pipeline({"name": "one", "steps": [{"name": "only", "stepKey": "test.noop"}]})
ALICE = ExecutionContextSnapshot(user_id="alice", tenant_id="tenant-x")
BOB = ExecutionContextSnapshot(user_id="bob", tenant_id="tenant-y")


def _settings(redis_server: EmbeddedRedis, tmp_path: Path, **control_plane: int) -> RuntimeSettings:
    return RuntimeSettings(
        redis_url=redis_server.url,
        redis_prefix=f"led{secrets.token_hex(3)}:",
        data_dir=tmp_path,
        control_plane=ControlPlaneSettings(background_pump=False, **control_plane),
    )


@pytest.fixture
async def services(redis_server: EmbeddedRedis, tmp_path: Path) -> AsyncIterator[RuntimeServices]:
    async with RuntimeServices(_settings(redis_server, tmp_path, heartbeat_interval_ms=200)) as started:
        yield started


@pytest.fixture
async def short_lease(redis_server: EmbeddedRedis, tmp_path: Path) -> AsyncIterator[RuntimeServices]:
    """Claims lapse after 300 ms: a recording Redis does not answer goes on in the background."""
    async with RuntimeServices(_settings(redis_server, tmp_path, claim_lease_ms=300)) as started:
        yield started


async def test_shared_run_ledger_records_submit_queue_dispatch_and_execution(
    services: RuntimeServices,
) -> None:
    plane = services.control_plane
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, ALICE)
    await plane.drain(5, ALICE)

    async def completed() -> bool:  # the local run finishes after the engine emitted finalization
        return (await plane.run_status(submitted.shared_run_id, ALICE)).local_status == "Completed"

    await wait_until(completed, timeout=10)
    entries = await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
    events = [entry.event for entry in entries]
    # The execution may start before the dispatch is recorded: the run is marked Dispatched
    # only after the provider accepted it, and the instance starts it at once.
    assert events[:2] == ["shared_run.submitted", "shared_run.queued"]
    assert {"shared_run.dispatched", "execution.created", "step.completed", "execution.finalized"} <= set(
        events
    )
    assert {entry.tenant_id for entry in entries} == {"tenant-x"}
    dispatched = next(entry for entry in entries if entry.event == "shared_run.dispatched")
    assert dispatched.local_run_id and dispatched.assigned_runtime_instance_id
    assert dispatched.runtime_instance_id != dispatched.assigned_runtime_instance_id  # pump is not the target
    execution_entries = [entry for entry in entries if entry.execution_id]
    assert execution_entries
    assert {entry.assigned_runtime_instance_id for entry in execution_entries} == {
        dispatched.assigned_runtime_instance_id
    }
    assert await services.audit.queries.ledger(BOB, shared_run_id=submitted.shared_run_id) == []


async def test_a_dispatch_whose_recording_reply_was_lost_is_in_the_ledger_once(
    services: RuntimeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis recorded the run Dispatched but its reply never came back (a connection cut
    mid-reply): the pump sends the recording again, which must count as done, not as a claim
    lost to another pump, so the dispatch is journaled (found by the data-centre suite: a
    control plane cut off from Redis mid-drain left a completed run without its dispatch)."""
    plane = services.control_plane
    queue = plane.parts.queue
    mark = queue.mark_dispatched
    lost: list[QueueTransition] = []

    async def reply_lost_once(shared_run_id: str, token: str, fields: dict[str, str]) -> QueueTransition:
        transition = await mark(shared_run_id, token, fields)
        if not lost:
            lost.append(transition)
            raise StoreUnavailableError("injected: the connection failed before the reply arrived")
        return transition

    monkeypatch.setattr(queue, "mark_dispatched", reply_lost_once)
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, ALICE)
    drained = await plane.drain(5, ALICE)
    assert [t.applied for t in lost] == [True] and drained.dispatched == 1

    async def completed() -> bool:
        return (await plane.run_status(submitted.shared_run_id, ALICE)).local_status == "Completed"

    await wait_until(completed, timeout=10)
    entries = await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
    dispatched = [entry for entry in entries if entry.event == "shared_run.dispatched"]
    assert len(dispatched) == 1 and dispatched[0].local_run_id
    assert [e.event for e in entries].count("shared_run.requeued") == 0


async def test_a_dispatch_whose_recording_outlived_the_claim_lease_is_journaled_once_redis_answers(
    short_lease: RuntimeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis recorded the run Dispatched, then stopped answering for longer than the claim
    lease: the drain fails with store_unavailable, the claim is not requeued (an instance holds
    the run), and the recording is sent again in the background until Redis answers, so the
    dispatch is journaled once."""
    services = short_lease
    plane = services.control_plane
    queue = plane.parts.queue
    mark = queue.mark_dispatched
    answering = asyncio.Event()
    sent: list[QueueTransition] = []

    async def unanswered_until_healed(
        shared_run_id: str, token: str, fields: dict[str, str]
    ) -> QueueTransition:
        if not sent:
            sent.append(await mark(shared_run_id, token, fields))  # applied; its reply lost
        if not answering.is_set():
            raise StoreUnavailableError("injected: Redis does not answer")
        return await mark(shared_run_id, token, fields)

    monkeypatch.setattr(queue, "mark_dispatched", unanswered_until_healed)
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, ALICE)
    with pytest.raises(StoreUnavailableError):
        await plane.drain(5, ALICE)
    answering.set()

    async def journaled() -> bool:
        entries = await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
        return any(entry.event == "shared_run.dispatched" for entry in entries)

    await wait_until(journaled, timeout=10)
    status = await plane.run_status(submitted.shared_run_id, ALICE)
    item = await queue.item(submitted.shared_run_id)
    entries = await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
    events = [entry.event for entry in entries]
    assert [t.applied for t in sent] == [True]
    assert events.count("shared_run.dispatched") == 1 and "shared_run.requeued" not in events
    assert item is not None and item.status is QueueItemStatus.DISPATCHED
    assert status.local_run_id is not None


async def test_a_recording_answered_only_after_its_run_finished_and_left_the_queue_is_journaled_once(
    short_lease: RuntimeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis recorded the run Dispatched, its reply was lost, and Redis answered the recording
    sent again only once the instance had run the run to its end and it had left the queue (its
    item gone): the resend must still find its own recording, so the dispatch is journaled once
    (found by the data-centre suite: a control plane cut off from Redis mid-drain for longer
    than one-step runs take left completed runs without their dispatch entry)."""
    services = short_lease
    plane = services.control_plane
    queue = plane.parts.queue
    mark = queue.mark_dispatched
    answering = asyncio.Event()
    resent: list[QueueTransition] = []

    async def answered_after_the_run_left(
        shared_run_id: str, token: str, fields: dict[str, str]
    ) -> QueueTransition:
        if not answering.is_set():
            await mark(shared_run_id, token, fields)  # applied every time; its reply lost
            raise StoreUnavailableError("injected: Redis does not answer")
        resent.append(await mark(shared_run_id, token, fields))
        return resent[-1]

    monkeypatch.setattr(queue, "mark_dispatched", answered_after_the_run_left)
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, ALICE)
    with pytest.raises(StoreUnavailableError):
        await plane.drain(5, ALICE)

    async def completed() -> bool:
        return (await plane.run_status(submitted.shared_run_id, ALICE)).local_status == "Completed"

    await wait_until(completed, timeout=10)
    status = await plane.run_status(submitted.shared_run_id, ALICE)
    retired = await plane.parts.runs.retire(
        submitted.shared_run_id, ALICE.tenant_id, status.local_run_id, 60_000
    )
    assert retired in (RetireOutcome.RETIRED, RetireOutcome.ALREADY_RETIRED)
    assert await queue.item(submitted.shared_run_id) is None
    answering.set()

    async def journaled() -> bool:
        entries = await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
        return any(entry.event == "shared_run.dispatched" for entry in entries)

    await wait_until(journaled, timeout=10)
    entries = await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
    dispatched = [entry for entry in entries if entry.event == "shared_run.dispatched"]
    assert [(t.applied, t.detail) for t in resent] == [(True, "resent")]
    assert len(dispatched) == 1 and dispatched[0].local_run_id == status.local_run_id


async def test_cancelled_shared_run_is_in_the_ledger(services: RuntimeServices) -> None:
    plane = services.control_plane
    submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, ALICE)
    await plane.cancel(submitted.shared_run_id, ALICE)
    with pytest.raises(ConflictError):
        await plane.cancel(submitted.shared_run_id, ALICE)
    events = [
        e.event for e in await services.audit.queries.ledger(ALICE, shared_run_id=submitted.shared_run_id)
    ]
    assert events == ["shared_run.submitted", "shared_run.queued", "shared_run.cancelled"]
