"""What the data centre's clients do: submit runs of several tenants over MCP, and count outcomes.

Owns the pipelines the scenarios submit, the client side of a submit (an MCP session over
streamable HTTP per control plane and tenant; a failed call is sent again to the next control
plane in rotation with the same idempotency key, as a load balancer retries, and a control
plane whose /readyz fails can be taken out of rotation), waiting for the acknowledged runs'
durable records, and the tally read from the durable store: completed, lost (acknowledged and
never completed), duplicates (a run with two executions, a step completed twice, an execution
finalized twice, a run submitted twice) and ledger gaps (a completed run without its submit,
dispatch or end), with the figures (runs/s, p50 / p99 submit -> Completed) from the run
records. Must not inject faults. Runs on the client host's loop."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mcp import Client

from runtime_core.instances import RunExecutionIndex
from runtime_core.queueing import SharedQueue, SharedRunStore
from runtime_core.storage import LedgerEntry, RunRecord, RunRecordCursor, RunRecordQuery
from tests.e2e.mcp_support import BearerClient
from tests.hosts.datacentre import CONTROL_PLANES, DataCentre, Tenant

SUBMIT_CONCURRENCY = 24
SUBMIT_ATTEMPTS = 8
CALL_TIMEOUT_S = 30.0
LEDGER_LIMIT = 1_000_000
LEDGER_FLUSH_TIMEOUT_S = 30.0
RECORD_PAGE = 1_000
RECORD_CLOCK_MARGIN = timedelta(seconds=5)  # every host shares this machine's clock: a margin only
EVIDENCE = ("shared_run.submitted", "shared_run.dispatched", "execution.finalized")
TERMINAL = {"Completed", "Failed", "Cancelled", "Rejected"}

WORK = {
    "name": "dc-work",
    "steps": [
        {"name": "fetch", "stepKey": "test.noop"},
        {"name": "left", "stepKey": "test.noop", "dependsOn": ["fetch"]},
        {"name": "right", "stepKey": "test.noop", "dependsOn": ["fetch"]},
        {"name": "merge", "stepKey": "test.noop", "dependsOn": ["left", "right"]},
    ],
}


def gated(name: str = "dc-gated") -> dict[str, Any]:
    """`fetch -> gate -> finish`: `gate` holds the run until the file named by input `gate` exists."""
    gate = {"name": "gate", "stepKey": "test.wait_for_file", "dependsOn": ["fetch"]}
    gate["config"] = {"pathFromState": "gate", "maxPollMs": 50}
    finish = {"name": "finish", "stepKey": "test.noop", "dependsOn": ["gate"]}
    return {"name": name, "steps": [{"name": "fetch", "stepKey": "test.noop"}, gate, finish]}


@dataclass(frozen=True)
class Acknowledged:
    shared_run_id: str
    tenant_id: str
    plane: str  # the control plane whose answer acknowledged it
    attempts: int


@dataclass
class Clients:
    """One MCP session per (control plane, tenant), opened on first use and reopened after failing."""

    dc: DataCentre
    sessions: dict[tuple[str, str], Client] = field(default_factory=dict)
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    failures: Counter[str] = field(default_factory=Counter)
    out_of_rotation: set[str] = field(default_factory=set)

    async def session(self, plane: str, tenant: Tenant) -> Client:
        key = (plane, tenant.tenant_id)
        if key not in self.sessions:
            client = BearerClient(f"{self.dc.plane_url(plane)}/mcp", tenant.token)
            self.sessions[key] = await asyncio.wait_for(
                self.stack.enter_async_context(client), CALL_TIMEOUT_S
            )
        return self.sessions[key]

    async def call(self, plane: str, tenant: Tenant, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured answer; raises (and drops the session) on any failure."""
        try:
            session = await self.session(plane, tenant)
            result = await asyncio.wait_for(session.call_tool(tool, arguments), CALL_TIMEOUT_S)
        except Exception:
            self.sessions.pop((plane, tenant.tenant_id), None)
            raise
        if result.is_error or result.structured_content is None:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            raise ToolError(text[:300])
        return result.structured_content

    async def submit(
        self, n: int, tenant: Tenant, key: str, definition: dict[str, Any], run_input: dict[str, Any]
    ) -> Acknowledged:
        """Submit run `n` to the control planes in rotation (n % 2 first): each failure sends it
        again to the next one, as a load balancer retries."""
        arguments = {"definition": definition, "input": run_input, "idempotency_key": key}
        for attempt in range(1, SUBMIT_ATTEMPTS + 1):
            plane = self.next_plane(n + attempt - 1)
            try:
                answer = await self.call(plane, tenant, "submit", arguments)
            except Exception as exc:
                self.failures[f"{plane}: {type(exc).__name__}: {str(exc)[:80]}"] += 1
                if attempt == SUBMIT_ATTEMPTS:
                    raise
                await asyncio.sleep(0.2 * attempt)  # a client's backoff before it sends again
                continue
            return Acknowledged(answer["shared_run_id"], tenant.tenant_id, plane, attempt)
        raise AssertionError("unreachable")

    def next_plane(self, n: int) -> str:
        """The n-th control plane in rotation among those in it (a load balancer takes a control
        plane whose /readyz fails out of rotation)."""
        rotation = [plane for plane in CONTROL_PLANES if plane not in self.out_of_rotation]
        return rotation[n % len(rotation)]

    def refused_by(self, plane: str) -> int:
        return sum(count for failure, count in self.failures.items() if failure.startswith(f"{plane}:"))


class ToolError(Exception):
    """A tool answered with an error result."""


@asynccontextmanager
async def clients(dc: DataCentre) -> AsyncIterator[Clients]:
    opened = Clients(dc)
    try:
        yield opened
    finally:
        try:
            await asyncio.wait_for(opened.stack.aclose(), CALL_TIMEOUT_S)
        except Exception:  # a session to a host that was partitioned may not close cleanly
            pass


async def submit_runs(
    opened: Clients,
    label: str,
    count: int,
    definition: dict[str, Any] | None = None,
    run_input: dict[str, Any] | None = None,
    *,
    into: list[Acknowledged] | None = None,
) -> list[Acknowledged]:
    """`count` runs, tenants interleaved, SUBMIT_CONCURRENCY at a time; the acknowledged ones
    (also appended to `into` as each is acknowledged, for a scenario watching the progress)."""
    gate = asyncio.Semaphore(SUBMIT_CONCURRENCY)
    tenants = opened.dc.tenants
    into = [] if into is None else into

    async def one(n: int) -> Acknowledged:
        async with gate:
            tenant = tenants[n % len(tenants)]
            acknowledged = await opened.submit(n, tenant, f"{label}-{n}", definition or WORK, run_input or {})
            into.append(acknowledged)
            return acknowledged

    return list(await asyncio.gather(*(one(n) for n in range(count))))


@dataclass
class Tally:
    label: str
    submitted: int
    records: dict[str, RunRecord]
    duplicates: dict[str, list[str]]  # shared run id -> what happened twice
    seconds: float
    unfinished: dict[str, str] = field(default_factory=dict)  # shared run id -> where it is stuck
    gaps: dict[str, list[str]] = field(default_factory=dict)  # shared run id -> evidence missing

    @property
    def completed(self) -> int:
        return sum(1 for r in self.records.values() if r.status == "Completed")

    @property
    def lost(self) -> int:
        return self.submitted - self.completed

    def figures(self) -> str:
        """Runs/s from the first submit to the last end, and submit -> Completed latencies, all
        from the run records (the hosts' own clocks: not when this client noticed)."""
        done = [r for r in self.records.values() if r.status == "Completed"]
        if len(done) < 2:
            return "no figures"
        latencies = sorted((r.ended_at - r.created_at).total_seconds() for r in done)
        span = (max(r.ended_at for r in done) - min(r.created_at for r in done)).total_seconds()
        p99 = statistics.quantiles(latencies, n=100)[98]
        return (
            f"{len(done) / span:.1f} runs/s, submit -> Completed p50 "
            f"{statistics.median(latencies) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms "
            f"(p50 in the queue {_median_ms(done, 'created_at', 'dispatched_at')} ms, dispatched -> "
            f"started {_median_ms(done, 'dispatched_at', 'started_at')} ms, running "
            f"{_median_ms(done, 'started_at', 'ended_at')} ms)"
        )

    def line(self) -> str:
        return (
            f"[{self.label}] submitted {self.submitted}, completed {self.completed}, "
            f"duplicates {len(self.duplicates)}, lost {self.lost}, ledger gaps {len(self.gaps)} "
            f"({self.seconds:.1f} s)"
        )


@dataclass(frozen=True)
class Started:
    """When a scenario began: for its duration, and to list only the run records it made."""

    at: float = field(default_factory=time.monotonic)
    wall: datetime = field(default_factory=lambda: datetime.now(UTC))

    def seconds(self) -> float:
        return time.monotonic() - self.at


def _median_ms(records: list[RunRecord], start: str, end: str) -> str:
    spans = [
        (getattr(r, end) - getattr(r, start)).total_seconds()
        for r in records
        if getattr(r, start) and getattr(r, end)
    ]
    return f"{statistics.median(spans) * 1000:.0f}" if spans else "?"


async def wait_for_records(
    dc: DataCentre, acknowledged: list[Acknowledged], started: Started, timeout_s: float
) -> dict[str, RunRecord]:
    """The durable run record of every acknowledged run, once each one ended (or at the deadline):
    one listing per tenant of the records made since the scenario began, per poll."""
    wanted = {run.shared_run_id: run.tenant_id for run in acknowledged}
    tenants = sorted(set(wanted.values()))
    deadline = time.monotonic() + timeout_s
    while True:
        found: dict[str, RunRecord] = {}
        for tenant_id in tenants:
            found.update(await _records_since(dc, tenant_id, started.wall - RECORD_CLOCK_MARGIN))
        found = {shared: r for shared, r in found.items() if shared in wanted and r.status in TERMINAL}
        if len(found) == len(wanted) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.25)  # polling the records other processes write


async def _records_since(dc: DataCentre, tenant_id: str, since: datetime) -> dict[str, RunRecord]:
    assert dc.store is not None
    found: dict[str, RunRecord] = {}
    query = RunRecordQuery(created_after=since, limit=RECORD_PAGE)
    while True:
        page = await dc.store.list_run_records(tenant_id, query)
        found.update({record.shared_run_id: record for record in page})
        if len(page) < RECORD_PAGE:
            return found
        last = page[-1]
        cursor = RunRecordCursor(created_at=last.created_at, shared_run_id=last.shared_run_id)
        query = query.model_copy(update={"before": cursor})


async def ledger_of(dc: DataCentre, acknowledged: list[Acknowledged]) -> dict[str, list[LedgerEntry]]:
    """Every ledger entry of the runs (by shared run id) and of their executions."""
    assert dc.store is not None
    by_run: dict[str, list[LedgerEntry]] = defaultdict(list)
    for run in acknowledged:
        seen: dict[str, LedgerEntry] = {}
        for entry in await dc.store.list_ledger(
            run.tenant_id, shared_run_id=run.shared_run_id, limit=LEDGER_LIMIT
        ):
            seen[entry.entry_id] = entry
        executions = {e.execution_id for e in seen.values() if e.execution_id}
        for execution_id in executions:
            for entry in await dc.store.list_ledger(
                run.tenant_id, execution_id=execution_id, limit=LEDGER_LIMIT
            ):
                seen[entry.entry_id] = entry
        by_run[run.shared_run_id] = sorted(seen.values(), key=lambda e: (e.recorded_at, e.sequence))
    return dict(by_run)


def duplicates_in(ledger: dict[str, list[LedgerEntry]]) -> dict[str, list[str]]:
    """Per run, what happened more than once: executions created, dispatches accepted (distinct
    local runs that started its execution), a step completed, its execution finalized."""
    found: dict[str, list[str]] = {}
    for shared_run_id, entries in ledger.items():
        twice = []
        executions = {e.execution_id for e in entries if e.event == "execution.created"}
        if len(executions) > 1:
            twice.append(f"{len(executions)} executions")
        steps = Counter((e.execution_id, e.step_name) for e in entries if e.event == "step.completed")
        twice += [f"step {step} completed {n} times" for (_, step), n in steps.items() if n > 1]
        finalized = Counter(e.execution_id for e in entries if e.event == "execution.finalized")
        twice += [f"finalized {n} times" for n in finalized.values() if n > 1]
        submitted = sum(1 for e in entries if e.event == "shared_run.submitted")
        twice += [f"submitted {submitted} times"] if submitted > 1 else []
        if twice:
            found[shared_run_id] = twice
    return found


def gaps_in(ledger: dict[str, list[LedgerEntry]], completed: set[str]) -> dict[str, list[str]]:
    """Per completed run, the evidence its ledger lacks (its submit, its dispatch, its end),
    followed by what it has, in order (so a failure says where the gap is)."""
    found = {}
    for shared_run_id in completed:
        entries = ledger.get(shared_run_id, [])
        events = {e.event for e in entries}
        missing = [event for event in EVIDENCE if event not in events]
        if missing:
            found[shared_run_id] = [f"missing {m}" for m in missing] + [
                f"{e.event} by {e.runtime_instance_id or e.attributes.get('worker_id', '?')}" for e in entries
            ]
    return found


async def tally(
    dc: DataCentre, label: str, acknowledged: list[Acknowledged], started: Started, timeout_s: float
) -> Tally:
    records = await wait_for_records(dc, acknowledged, started, timeout_s)
    return await account(dc, label, acknowledged, records, started.seconds())


async def account(
    dc: DataCentre,
    label: str,
    acknowledged: list[Acknowledged],
    records: dict[str, RunRecord],
    seconds: float,
) -> Tally:
    """The tally of the runs whose records were found after `seconds`: duplicates and ledger
    gaps read from every run's ledger (entries other processes buffered may still be on their
    way: read again until none is missing, for a while), where unfinished runs are stuck."""
    completed = {shared for shared, record in records.items() if record.status == "Completed"}
    deadline = time.monotonic() + LEDGER_FLUSH_TIMEOUT_S
    while True:
        ledger = await ledger_of(dc, acknowledged)
        gaps = gaps_in(ledger, completed)
        if not gaps or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    unfinished = await where_stuck(
        dc, [a.shared_run_id for a in acknowledged if a.shared_run_id not in records]
    )
    return Tally(label, len(acknowledged), records, duplicates_in(ledger), seconds, unfinished, gaps)


async def where_stuck(dc: DataCentre, shared_run_ids: list[str]) -> dict[str, str]:
    """What the hot state says of runs that never ended: the shared run, its queue item, its local run."""
    assert dc.hot_state is not None
    runs, queue, index = (
        SharedRunStore(dc.hot_state),
        SharedQueue(dc.hot_state),
        RunExecutionIndex(dc.hot_state),
    )
    found = {}
    for shared_run_id in shared_run_ids:
        run, item = await runs.get(shared_run_id), await queue.item(shared_run_id)
        local = await index.get_by_shared(shared_run_id)
        found[shared_run_id] = (
            f"run {run.status if run else None} local {run.local_run_id if run else None} on "
            f"{run.assigned_runtime_instance_id if run else None}; item {item.status if item else None}; "
            f"indexed {local.local_run_id if local else None} {local.status if local else None} "
            f"exec {local.execution_id if local else None}"
        )
    return found
