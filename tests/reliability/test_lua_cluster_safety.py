"""Issue 9.5: every Lua script touches only keys passed in KEYS, all in one Cluster slot.

Two checks per script in `lua/*.lua`:
- static: every `redis.call` / `redis.pcall` names its command literally and its key
  arguments are `KEYS[n]` (or a loop over KEYS) only, never a key name built in Lua;
- dynamic: the script is run through its real Python wrapper in a representative scenario
  (DAG store, execution control, retention, replay, concurrency gate, registry, admission
  reservations, shared queue, recovery) while `MONITOR` records each EVALSHA (or EVAL, for a
  script queued inside a pipeline) and every command the script ran; each touched key must
  be one of that call's KEYS and all of the call's KEYS must hash to the same Redis Cluster
  slot (CRC16 with hash tags, per the spec).
A new script without a scenario here fails `test_every_script_is_exercised_by_its_wrapper`.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from redis.asyncio import Redis

from runtime_core.agents import AiAgentExecutor
from runtime_core.assistance import (
    AssistanceLeases,
    HelpBoard,
    SeatOutcome,
    assistant_claimer,
    tenant_scope,
)
from runtime_core.concurrency import ConcurrencyContext, ConcurrencyGate, resolve_effective_concurrency
from runtime_core.control import ExecutionControlService
from runtime_core.dag import ClaimOperations, DagStore, DropOutcome, ExecutionPages, restore_operation
from runtime_core.events import EVENT_FIELD, RunEvent, RunEventPublisher, RunEventType
from runtime_core.flow import ProviderRateLimit, ProviderRateLimits, StepRateLimiter
from runtime_core.hot_state import LUA_DIR, EmbeddedRedis, HotState, connect_hot_state, script_source
from runtime_core.instances import InstanceRegistry, RuntimeInstance
from runtime_core.lifecycle import LifecycleSchedule
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import (
    PumpIdentity,
    RetireOutcome,
    SharedQueueKeys,
    SharedRunStatus,
    SharedRunStore,
    SubmitMode,
)
from runtime_core.recovery import (
    InstanceHealthStore,
    RecoveryClaims,
    SharedRunRecovery,
    UnsafeMarkOutcome,
    release_execution_claims,
)
from runtime_core.retention import EVICT_POLICY
from runtime_core.scheduling import TICK_KIND_SCHEDULED, ClaimOutcome, ScheduleTicks, SettleOutcome
from runtime_core.steps.llm import build_llm_providers
from runtime_core.steps.operations import OperationState, StartOutcome, UncertaintyPolicy
from runtime_core.storage import SqliteDurableStore
from runtime_core.tasks import TaskRecord, TaskStatus, TaskStore
from runtime_core.webhooks import (
    ClaimedDelivery,
    WebhookDeliverySettings,
    WebhookOutbox,
    WebhookTarget,
    delivery_id,
)
from tests.helpers import wait_until
from tests.integration.audit_support import TENANT_A, make_rig
from tests.integration.control_plane_support import DEFAULT_TENANT, ONE_STEP, control_plane, start_instance
from tests.reliability.lua_cluster import (
    ALL_ARGS_ARE_KEYS,
    FIRST_ARG_IS_KEY,
    KEYLESS_COMMANDS,
    crc16_xmodem,
    hash_tag,
    is_declared_key,
    key_arguments,
    key_loop_variables,
    key_position_names,
    key_slot,
    redis_calls,
)

SCRIPTS = sorted(LUA_DIR.glob("*.lua"))
SCRIPT_NAMES = [path.stem for path in SCRIPTS]
STOP_MARKER = "lua-safety-monitor-stop"


@dataclass
class ScriptCall:
    script: str
    keys: list[str]
    touched: list[str] = field(default_factory=list)


def _sha_to_script() -> dict[str, str]:
    return {hashlib.sha1(script_source(p).encode()).hexdigest(): p.stem for p in SCRIPTS}


def _as_monitor_shows(text: str) -> str:
    """A script's text as MONITOR prints an EVAL argument (after redis-py unescapes quotes)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _eval_as_evalsha(command: str) -> list[str]:
    """`EVAL <text> numkeys keys...` (a script queued in a pipeline) -> EVALSHA tokens.

    redis-py joins MONITOR arguments with spaces, so the multi-word text is recognised by
    comparing with each script's text rather than by splitting.
    """
    for path in SCRIPTS:
        source = script_source(path)
        text = _as_monitor_shows(source)
        if command.startswith(f"EVAL {text} "):
            rest = command[len(f"EVAL {text} ") :].split(" ")
            return ["EVALSHA", hashlib.sha1(source.encode()).hexdigest(), *rest]
    return command.split(" ")


class ScriptMonitor:
    """`MONITOR` on its own connection: each EVALSHA with this prefix's keys and what it ran."""

    def __init__(self, url: str, prefix: str) -> None:
        self.client = Redis.from_url(url, decode_responses=True)
        self.prefix = prefix
        self.calls: list[ScriptCall] = []
        self._scripts = _sha_to_script()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ScriptMonitor:
        monitor = self.client.monitor()
        await monitor.__aenter__()
        self._task = asyncio.create_task(self._collect(monitor))
        return self

    async def _collect(self, monitor: object) -> None:
        current: ScriptCall | None = None
        try:
            while True:
                entry = await monitor.next_command()  # type: ignore[attr-defined]
                command = str(entry["command"])
                tokens = _eval_as_evalsha(command) if command.startswith("EVAL ") else command.split(" ")
                if entry["client_type"] == "lua":
                    if current is not None:
                        current.touched += self._touched(tokens)
                    continue
                if tokens[0].upper() == "GET" and tokens[1:] == [self.prefix + STOP_MARKER]:
                    return
                current = self._script_call(tokens)
                if current is not None:
                    self.calls.append(current)
        finally:
            await monitor.__aexit__(None, None, None)  # type: ignore[attr-defined]

    def _script_call(self, tokens: list[str]) -> ScriptCall | None:
        if tokens[0].upper() != "EVALSHA":
            return None
        keys = tokens[3 : 3 + int(tokens[2])]
        if not any(key.startswith(self.prefix) for key in keys):
            return None  # another test's client
        return ScriptCall(self._scripts.get(tokens[1], tokens[1]), keys)

    @staticmethod
    def _touched(tokens: list[str]) -> list[str]:
        command = tokens[0].upper()
        if command in KEYLESS_COMMANDS:
            return []
        return tokens[1:] if command in ALL_ARGS_ARE_KEYS else tokens[1:2]

    async def stop(self, hot_state: HotState) -> None:
        await hot_state.redis.get(self.prefix + STOP_MARKER)
        assert self._task is not None
        await asyncio.wait_for(self._task, timeout=10)
        await self.client.aclose()


# Scenarios: each runs some scripts through their real wrappers.


async def _dag_scenario(hot_state: HotState, durable: SqliteDurableStore) -> None:
    """create / claim (batch and single) / fail / renew lease / complete / release / recover_stale /
    release_execution_claims / reassign_execution / control_cas / step_output /
    agent_checkpoint_begin / agent_checkpoint_end / finalize /
    compact_results / execution_summary / drop_execution / restore_execution / fence_execution."""
    retention = {"policies": [EVICT_POLICY], "triggers": {"completedSteps": 1}}
    pipeline = parse_pipeline(
        {
            "name": "lua-safety",
            "config": {"retention": retention},
            "steps": [
                {"name": "a", "stepKey": "test.noop"},
                {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
                # A streamed prompt writes its live output (step_output).
                {
                    "name": "c",
                    "stepKey": "ai.prompt",
                    "dependsOn": ["a"],
                    "config": {"template": "hello there", "stream": True},
                },
                # An agent checkpoints its model turn (agent_checkpoint_begin / _end).
                {"name": "d", "stepKey": "ai.agent", "dependsOn": ["a"], "config": {"prompt": "hi"}},
            ],
        }
    )
    rig = make_rig(hot_state, durable)
    store: DagStore = rig.dag_store
    rig.engine.executors.register(AiAgentExecutor(build_llm_providers(), store, rig.engine.executors))
    await rig.engine.create_execution(pipeline, {}, TENANT_A, claim_first=True)  # claims with creating
    await rig.engine.release_first_claims()
    execution_id = await rig.engine.create_execution(pipeline, {}, TENANT_A)
    claim = dict(lease_ms=60_000, worker_id="lua-test", token_prefix="lua")
    [first] = (await store.claim_ready_steps(execution_id, max_steps=1, **claim)).claims
    await store.fail_step(first, retry=True, delay_ms=0, error={"code": "transient"})
    [again] = (await store.claim_step(execution_id, "a", **claim)).claims
    assert await store.renew_step_lease(again, lease_ms=60_000)
    await store.complete_step(again, {"data": {"step": "a"}})
    short = await store.claim_ready_steps(
        execution_id, max_steps=2, lease_ms=1, worker_id="lua-test", token_prefix="short"
    )
    await store.release_step(short.claims[0])

    async def lapsed_claim_recovered() -> bool:
        return bool(await store.recover_stale(execution_id))

    await wait_until(lapsed_claim_recovered)
    await store.claim_ready_steps(execution_id, max_steps=2, **claim)
    await release_execution_claims(
        store, execution_id, claimed_before_ms=await hot_state.server_time_ms(), dead_local_run_id="lr_dead"
    )
    await store.reassign_execution(execution_id, {"local_run_id": "lr_lua"})
    control = ExecutionControlService(hot_state)
    await control.pause(execution_id, TENANT_A)
    await control.resume(execution_id, TENANT_A)
    assert await rig.engine.run(execution_id, workers=2) == "Completed"
    pages = ExecutionPages(store)
    for _ in range(2):  # the second summary leaves the pipeline's text out
        summary = await pages.summary(execution_id)
        assert summary is not None and summary.step_counts == {"Completed": 4}
    assert await store.drop_finished(execution_id) is DropOutcome.DROPPED
    assert (await rig.audit.replay.replay(execution_id, TENANT_A)).restored
    assert (
        await store.fence_execution("exec_lua_never_created", "lua safety test", retention_ms=60_000) is None
    )


async def _assistance_scenario(hot_state: HotState, durable: SqliteDurableStore) -> None:
    """assist_post / assist_wanted on a help board, assist_join (join, renew) / assist_leave, and
    an assistant's claims and failures through advance_steps, claim_step and fail_step."""
    pipeline = parse_pipeline(
        {
            "name": "lua-assist",
            "steps": [
                {"name": "a", "stepKey": "test.noop"},
                {"name": "b", "stepKey": "test.noop"},
                {"name": "c", "stepKey": "test.noop"},
            ],
        }
    )
    rig = make_rig(hot_state, durable)
    store: DagStore = rig.dag_store
    execution_id = await rig.engine.create_execution(pipeline, {}, TENANT_A)
    board = HelpBoard(hot_state)
    scopes = [tenant_scope(TENANT_A.tenant_id)]
    await board.post(execution_id, scopes, ttl_ms=60_000)
    assert await board.wanted(scopes, limit=10) == [execution_id]
    leases = AssistanceLeases(store)
    seat = await leases.join(
        execution_id,
        "rt_lua|inc_lua",
        runtime_instance_id="rt_lua",
        incarnation="inc_lua",
        workers=2,
        lease_ms=60_000,
    )
    assert seat.outcome is SeatOutcome.SEATED
    claimer = assistant_claimer("rt_lua|inc_lua")
    claim = dict(lease_ms=60_000, worker_id="lua-test", token_prefix="lua", owner=claimer)
    [first] = (await store.claim_ready_steps(execution_id, max_steps=1, **claim)).claims
    await store.fail_step(first, retry=True, delay_ms=0, error={"code": "transient"}, claimer=claimer)
    [again] = (await store.claim_step(execution_id, first.step_name, **claim)).claims
    await store.advance(
        execution_id, [(again, {"data": {}})], max_claim=0, lease_ms=0, token_prefix="", owner=claimer
    )
    assert (await leases.renew(execution_id, "rt_lua|inc_lua", lease_ms=60_000)).outcome is SeatOutcome.SEATED
    assert (await leases.leave(execution_id, "rt_lua|inc_lua", steps_completed=1, reason="lua")).outcome is (
        SeatOutcome.LEFT
    )
    await board.withdraw(execution_id, scopes)
    assert await board.wanted(scopes, limit=10) == []


async def _lease_scenario(hot_state: HotState) -> None:
    """lease_acquire / lease_release over three scopes (global, provider, model)."""
    step = {"provider": "openai", "model": "gpt-4.1", "operation": "llm.chat"}
    context = ConcurrencyContext.for_step(
        pipeline_name="lua-safety",
        pipeline_version="1",
        step_name="summarize",
        step_key="llm.summary",
        step_config=step,
        execution_id="exec_lua",
        runtime_instance_id="rt_lua",
    )
    section = {"maxGlobalConcurrency": 4, "maxProviderConcurrency": 2, "maxModelConcurrency": 2}
    effective = resolve_effective_concurrency({"concurrency": section}, step, context)
    gate = ConcurrencyGate(hot_state)
    grant = await gate.try_acquire(effective, "lease-lua")
    await gate.release(grant)  # type: ignore[arg-type]


async def _control_plane_scenario(hot_state: HotState) -> None:
    """register / publish / retire an instance, run index swaps, shared_* scripts (and the
    expiry of an earlier life's claims), reservations, the lifecycle scripts (claim a due ended
    run, retire it), then the recovery scripts."""
    plane = control_plane(hot_state)
    await plane.parts.queue.expire_claims_of_earlier_lives("control-plane:testhost/", "inc_lua")
    instance = await start_instance(plane)
    try:
        dispatched = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        cancelled = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.cancel(cancelled.shared_run_id, DEFAULT_TENANT)
        assert (await plane.drain(10, DEFAULT_TENANT)).dispatched == 1
        await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        for mode in (SubmitMode.QUEUE_FIRST, SubmitMode.DIRECT_DISPATCH, SubmitMode.QUEUE_FIRST):
            await plane.submit(ONE_STEP, {}, mode, DEFAULT_TENANT, idempotency_key=f"lua-{mode.value}")
        pump = PumpIdentity(pump_runtime_instance_id="rt_lua", pump_worker_id="lua-test")
        requeued = await plane.parts.queue.claim_next(pump)
        assert requeued is not None
        await plane.parts.queue.requeue(requeued, "lua safety test")
        # A failed dispatch gives its reservation back (an accepted one is released by the
        # instance's capacity publication).
        reservations = plane.parts.dispatcher.delivery.reservations
        assert (await reservations.reserve(instance.runtime_instance_id, "srun_lua", 60_000)).outcome.held
        assert await reservations.release(instance.runtime_instance_id, "srun_lua")
        ended = SharedQueueKeys(hot_state).of_run(cancelled.shared_run_id).ended
        due = await LifecycleSchedule(hot_state).claim_due(ended, grace_ms=0, lease_ms=60_000, limit=10)
        assert due == [cancelled.shared_run_id]
        retired = await plane.parts.runs.retire(
            cancelled.shared_run_id, DEFAULT_TENANT.tenant_id, None, 60_000
        )
        assert retired is RetireOutcome.RETIRED
        await _recovery_scenario(plane.parts.registry, hot_state, instance, dispatched.shared_run_id)
    finally:
        await plane.stop()


async def _recovery_scenario(
    registry: InstanceRegistry, hot_state: HotState, instance: RuntimeInstance, shared_run_id: str
) -> None:
    """mark_instance_unsafe, claim / complete_recovery_item, shared_recover, mark_instance_recovered,
    close_predecessors, retire_instance."""
    rid, incarnation = instance.runtime_instance_id, instance.incarnation
    await instance.stop(unregister=False)
    health = InstanceHealthStore(registry)

    async def marked_unsafe() -> bool:
        return await health.mark_unsafe(rid, 0) is UnsafeMarkOutcome.MARKED

    await wait_until(marked_unsafe)
    run = await SharedRunStore(hot_state).get(shared_run_id)
    assert run is not None and run.local_run_id is not None
    claims = RecoveryClaims(registry, reconciler_id="lua-test", lease_ms=60_000)
    await claims.claim(rid, run.local_run_id, incarnation)
    await claims.retry_later(rid, run.local_run_id)
    await claims.claim(rid, run.local_run_id, incarnation)
    await claims.complete(rid, run.local_run_id, "requeued")
    await SharedRunRecovery(hot_state).recover(
        shared_run_id,
        runtime_instance_id=rid,
        local_run_id=run.local_run_id,
        target=SharedRunStatus.QUEUED_GLOBALLY,
        resume_execution_id=None,
        fields={"reason": "lua safety test"},
    )
    await health.mark_recovered(rid, incarnation, 60_000)
    successor = await start_instance_again(instance)
    await health.close_predecessors(rid, successor.incarnation, [incarnation])
    await successor.stop()


async def start_instance_again(instance: RuntimeInstance) -> RuntimeInstance:
    """A new incarnation of the same runtime instance id (the process started again)."""
    return await RuntimeInstance(instance.settings, instance.deps).start()


async def _task_scenario(hot_state: HotState) -> None:
    """task_create (new and duplicate id) / task_transition (moved, unchanged, terminal, missing)."""
    store = TaskStore(hot_state)
    record = TaskRecord(
        task_id="task_" + secrets.token_hex(16),
        tenant_id="tenant-a",
        user_id="alice",
        tool="submit",
        run_id="srun_lua",
        origin={},
        ttl_ms=60_000,
        poll_interval_ms=1_000,
    )
    assert await store.create(record) is not None
    assert await store.create(record) is None
    for status in (
        TaskStatus.INPUT_REQUIRED,
        TaskStatus.INPUT_REQUIRED,
        TaskStatus.COMPLETED,
        TaskStatus.WORKING,
    ):
        await store.transition(record.task_id, status)
    await store.transition("task_" + "0" * 32, TaskStatus.WORKING)


async def _webhook_scenario(hot_state: HotState) -> None:
    """webhook_enqueue (new and again) / webhook_claim / webhook_settle (retrying, delivered, dead)."""
    outbox = WebhookOutbox(hot_state, WebhookDeliverySettings(max_attempts=2, backoff_base_ms=1))
    target = WebhookTarget("ops", "http://127.0.0.1:9/hook", "LUA_SAFETY_SECRET")
    for event_id in ("evt_lua_delivered", "evt_lua_dead"):
        assert await outbox.enqueue(event_id, "run.completed", "tenant-a", target, "{}")
    assert not await outbox.enqueue("evt_lua_delivered", "run.completed", "tenant-a", target, "{}")
    for second_attempt in (False, True):
        for event_id in ("evt_lua_delivered", "evt_lua_dead"):
            attempt = await _claim_when_due(outbox, delivery_id(event_id, "ops"))
            ok = second_attempt and event_id == "evt_lua_delivered"
            await outbox.settle(attempt, delivered=ok, http_status=200 if ok else 500, error="")


async def _run_event_scenario(hot_state: HotState) -> None:
    """publish_run_event: a durable event before and after the stream exists, a progress one."""
    publisher = RunEventPublisher(hot_state)
    ended = RunEvent(event_id="evt_lua_1", type=RunEventType.COMPLETED, tenant_id="tenant-a")
    await publisher.publish(ended)  # no stream yet: published only
    await hot_state.redis.xadd(publisher.keys.stream, {EVENT_FIELD: "{}"})  # as the webhook service does
    await publisher.publish(ended.model_copy(update={"event_id": "evt_lua_2"}))
    await publisher.publish(RunEvent(event_id="evt_lua_3", type=RunEventType.STARTED, tenant_id="tenant-a"))
    assert await hot_state.redis.xlen(publisher.keys.stream) == 2
    await publisher.aclose()


async def _schedule_scenario(hot_state: HotState) -> None:
    """schedule_claim_tick (claimed, handled, stale plan, busy, taken over) / schedule_settle_tick
    (settled, queued, dropped, lost) / schedule_release_queued (claimed, nothing waiting)."""
    ticks = ScheduleTicks(hot_state, lease_ms=1)
    sid, kind = "sched_lua", TICK_KIND_SCHEDULED
    assert (await ticks.claim(sid, 2_000, planned_from_ms=1_000, floor_ms=1_000, owner="a", kind=kind)).won
    assert (await ticks.settle(sid, 2_000, "a", run_id="srun_1")) is SettleOutcome.SETTLED
    handled = await ticks.claim(sid, 2_000, planned_from_ms=2_000, floor_ms=0, owner="a", kind=kind)
    assert handled.outcome is ClaimOutcome.ALREADY_HANDLED
    stale = await ticks.claim(sid, 3_000, planned_from_ms=1_000, floor_ms=0, owner="a", kind=kind)
    assert stale.outcome is ClaimOutcome.PLAN_AGAIN
    assert (await ticks.claim(sid, 3_000, planned_from_ms=2_000, floor_ms=0, owner="a", kind=kind)).won
    answers: list[ClaimOutcome] = []

    async def lease_of_a_ended() -> bool:  # a BUSY answer changed nothing: ask again
        claim = await ticks.claim(sid, 4_000, planned_from_ms=2_000, floor_ms=0, owner="b", kind=kind)
        answers.append(claim.outcome)
        return claim.outcome is not ClaimOutcome.BUSY

    await wait_until(lease_of_a_ended)
    assert answers[-1] is ClaimOutcome.TAKEN_OVER
    assert (await ticks.settle(sid, 3_000, "a")) is SettleOutcome.LOST
    assert (await ticks.settle(sid, 3_000, "b", queue=True)) is SettleOutcome.QUEUED
    assert (await ticks.claim(sid, 4_000, planned_from_ms=3_000, floor_ms=0, owner="b", kind=kind)).won
    assert (await ticks.settle(sid, 4_000, "b", queue=True)) is SettleOutcome.DROPPED
    assert await ticks.release_queued(sid, 3_000, "b") is not None
    assert await ticks.release_queued(sid, 3_000, "b") is None


async def _flow_scenario(hot_state: HotState) -> None:
    """flow_rate_limit: a provider budget takes a call, then refuses the next one. Per-key
    concurrency: a run holds its key's slot, the next waits in line (shared_enqueue), one in
    line is cancelled (shared_cancel), the first ends and gives its slot back (flow_release)."""
    budget = ProviderRateLimit(limit=1, period="1h", providers=("template",))
    limiter = StepRateLimiter(hot_state, ProviderRateLimits(budgets={"lua-key": budget}))
    assert await limiter.take("template") is None
    assert await limiter.take("template") is not None
    flow = {"concurrency": {"key": "input.k", "limit": 1}}
    keyed = parse_pipeline(
        {"name": "keyed", "config": {"flow": flow}, "steps": [{"name": "a", "stepKey": "test.noop"}]}
    )
    plane = control_plane(hot_state)
    await start_instance(plane)
    try:
        first, second, third = [
            (await plane.submit(keyed, {"k": "x"}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)).shared_run_id
            for _ in range(3)
        ]
        await plane.cancel(third, DEFAULT_TENANT)

        async def second_admitted() -> bool:  # the first ran, ended and released its slot
            await plane.drain(10, DEFAULT_TENANT)
            item = await plane.parts.queue.item(second)
            return item is not None and item.status.value != "Held"

        await wait_until(second_admitted, interval=0.05)
        assert first != second
    finally:
        await plane.stop()


async def _operations_scenario(hot_state: HotState, durable: SqliteDurableStore) -> None:
    """operation_begin / operation_settle / operation_restore: a step's operation recorded, settled,
    and one put back after a lost dataset."""
    rig = make_rig(hot_state, durable)
    execution_id = await rig.engine.create_execution(ONE_STEP, {}, TENANT_A)
    store: DagStore = rig.dag_store
    claim = dict(lease_ms=60_000, worker_id="lua-test", token_prefix="ops")
    [claimed] = (await store.claim_ready_steps(execution_id, max_steps=1, **claim)).claims

    async def emit(event: str, **attributes: object) -> None:
        return None

    operations = ClaimOperations(store, claimed, emit)
    start = await operations.begin("call", policy=UncertaintyPolicy.RETRY)
    assert start.outcome is StartOutcome.FRESH
    await operations.settle("call", OperationState.DONE, "answered", consume_input=True)
    assert await restore_operation(store, execution_id, "only", "lost", "op_lua", attempts=1, started_at_ms=1)


async def _claim_when_due(outbox: WebhookOutbox, identifier: str) -> ClaimedDelivery:
    claimed: list[ClaimedDelivery] = []

    async def due() -> bool:
        attempt = await outbox.claim(identifier, secrets.token_hex(8))
        claimed.extend([attempt] if attempt else [])
        return attempt is not None

    await wait_until(due)
    return claimed[0]


@pytest.fixture(scope="module")
async def observed_calls(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, list[ScriptCall]]]:
    hot_state = connect_hot_state(redis_server.url, prefix=f"lua{secrets.token_hex(4)}:")
    durable = await SqliteDurableStore.open(Path(tmp_path_factory.mktemp("lua")) / "runtime.db")
    monitor = await ScriptMonitor(redis_server.url, hot_state.prefix).__aenter__()
    try:
        await _dag_scenario(hot_state, durable)
        await _assistance_scenario(hot_state, durable)
        await _lease_scenario(hot_state)
        await _control_plane_scenario(hot_state)
        await _task_scenario(hot_state)
        await _webhook_scenario(hot_state)
        await _run_event_scenario(hot_state)
        await _schedule_scenario(hot_state)
        await _flow_scenario(hot_state)
        await _operations_scenario(hot_state, durable)
    finally:
        await monitor.stop(hot_state)
        await durable.close()
        await hot_state.close()
    by_script: dict[str, list[ScriptCall]] = defaultdict(list)
    for call in monitor.calls:
        by_script[call.script].append(call)
    yield dict(by_script)


# The slot function itself, against the vectors of the Redis Cluster specification.


def test_keyslot_matches_the_cluster_spec_crc16_and_hash_tag_rules() -> None:
    assert crc16_xmodem(b"123456789") == 0x31C3
    assert key_slot("{user1000}.following") == key_slot("{user1000}.followers")
    assert hash_tag("foo{}{bar}") == "foo{}{bar}"
    assert hash_tag("foo{{bar}}zap") == "{bar"
    assert hash_tag("foo{bar}{zap}") == "bar"
    assert hash_tag("mcprt:{exec_1}:meta") == "exec_1"


# Static: no key name is ever built inside a script.


@pytest.mark.parametrize("path", SCRIPTS, ids=SCRIPT_NAMES)
def test_script_passes_only_declared_keys_to_redis_calls(path: Path) -> None:
    source = script_source(path)  # with its included libraries
    index_vars, value_vars = key_loop_variables(source)
    position_names = frozenset(key_position_names(source))
    calls = redis_calls(source)
    assert calls, f"{path.name} makes no redis.call"
    known = KEYLESS_COMMANDS | ALL_ARGS_ARE_KEYS | FIRST_ARG_IS_KEY
    for call in calls:
        assert call.command is not None, f"{path.name}:{call.line} builds its command name dynamically"
        assert call.command in known, f"{path.name}:{call.line}: add {call.command} to the key table"
        for argument in key_arguments(call):
            assert is_declared_key(argument, index_vars, value_vars, position_names), (
                f"{path.name}:{call.line}: {call.command} key {argument!r} is not one of KEYS"
            )


# Dynamic: run through the real wrappers, watch every key each call touched.


def test_every_script_is_exercised_by_its_wrapper(observed_calls: dict[str, list[ScriptCall]]) -> None:
    assert sorted(observed_calls) == SCRIPT_NAMES


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_script_call_touches_only_its_keys_all_in_one_cluster_slot(
    script: str, observed_calls: dict[str, list[ScriptCall]]
) -> None:
    calls = observed_calls.get(script, [])
    assert calls, f"{script} was not run by any scenario"
    for call in calls:
        assert call.keys, f"{script} was called without KEYS"
        assert {key_slot(key) for key in call.keys} == {key_slot(call.keys[0])}, (
            f"{script} KEYS span several slots: {call.keys}"
        )
        assert set(call.touched) <= set(call.keys), (
            f"{script} touched keys outside its KEYS: {sorted(set(call.touched) - set(call.keys))}"
        )
