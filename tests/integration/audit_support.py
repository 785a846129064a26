"""Builders shared by the audit / retention / replay tests: a real Redis DAG engine wired to a
real durable store (SQLite or PostgreSQL) through `build_audit_services`, and deterministic test executors."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Any

from runtime_core.audit import AuditServices, AuditSettings, build_audit_services
from runtime_core.dag import DagEngine, DagStore, EngineSettings
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.policy import RetryEngine
from runtime_core.steps import StepFailure, StepInvocation, default_executor_registry
from runtime_core.storage import DurableStore

TENANT_A = ExecutionContextSnapshot(user_id="alice", tenant_id="tenant-a")
TENANT_B = ExecutionContextSnapshot(user_id="bob", tenant_id="tenant-b")
INSTANCE_ID = "rt_audit_test"
KIB = 1024


class BigResultExecutor:
    """`test.big`: returns `config.sizeBytes` of filler plus a running `depth` counter.

    Every string input must be a binding to an upstream `data` object whose blob has the
    configured size; `depth` is one more than the deepest upstream. A wrong binding is a
    permanent failure, so a Completed execution proves downstream steps read upstream data.
    """

    step_key = "test.big"

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        size = int(invocation.config.get("sizeBytes", 64 * KIB))
        depth = 0
        for name, upstream in invocation.inputs.items():
            if not isinstance(upstream, dict) or len(upstream.get("blob", "")) != size:
                raise StepFailure(f"input {name!r} did not resolve to upstream data", code="permanent")
            depth = max(depth, int(upstream["depth"]) + 1)
        blob = (invocation.step_name * (size // len(invocation.step_name) + 1))[:size]
        return {"data": {"step": invocation.step_name, "depth": depth, "blob": blob}}


class GateExecutor:
    """`test.gate`: blocks until `release` is set; counts its attempts."""

    step_key = "test.gate"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls: Counter[str] = Counter()

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        self.calls[invocation.step_name] += 1
        await self.release.wait()
        return {"data": {"step": invocation.step_name, "inputs": invocation.inputs}}


@dataclass
class Rig:
    hot_state: HotState
    dag_store: DagStore
    durable: DurableStore
    audit: AuditServices
    engine: DagEngine


def make_rig(
    hot_state: HotState,
    durable: DurableStore,
    *executors: object,
    settings: AuditSettings | None = None,
    lease_ms: int = 60_000,
) -> Rig:
    dag_store = DagStore(hot_state)
    registry = default_executor_registry()
    registry.register(BigResultExecutor())
    for executor in executors:
        registry.register(executor)  # type: ignore[arg-type]
    audit = build_audit_services(durable, dag_store, instance_id=INSTANCE_ID, settings=settings)
    engine = DagEngine(
        dag_store,
        registry,
        RetryEngine(),
        settings=EngineSettings(lease_ms=lease_ms),
        observer=audit.observer,
        results=audit.codec,
        instance_id=INSTANCE_ID,
    )
    return Rig(hot_state, dag_store, durable, audit, engine)


async def execution_memory_bytes(rig: Rig, execution_id: str) -> int:
    """Sum of `MEMORY USAGE` (exact, SAMPLES 0) over every Redis key of one execution."""
    pipe = rig.hot_state.redis.pipeline(transaction=False)
    for key in rig.dag_store.keys(execution_id).all():
        pipe.memory_usage(key, samples=0)
    return sum(int(size or 0) for size in await pipe.execute())
