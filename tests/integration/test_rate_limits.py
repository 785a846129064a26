"""Issue 30.4: time-window rate limits (GCRA on the Redis server clock, docs/flow-control.md).

Submit limits (the tenants file's `rateLimits`, a pipeline's `config.flow.rateLimits`) are
taken by the script that creates the run, atomically with it; a limited submit creates
nothing and answers `[rate_limited]` with the time to retry. Provider-key budgets (the
providers file's `rate_limits`) make a step wait without spending an attempt. Runs on a
single node and on the 3-master cluster.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mcp_runtime._errors import tool_error_text
from runtime_core.control_plane import ControlPlane
from runtime_core.errors import ConfigurationError, InvalidPipelineError
from runtime_core.flow import ProviderRateLimit, ProviderRateLimits, RateLimitedError, StepRateLimiter
from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.pipeline import PipelineDefinition, parse_pipeline
from runtime_core.queueing import SharedRunStatus, SubmitMode
from runtime_core.steps import StepInvocation, load_provider_settings
from tests.conftest import RedisTarget
from tests.helpers import wait_until
from tests.integration.control_plane_support import (
    DEFAULT_TENANT,
    ONE_STEP,
    OTHER_SHARED_TENANT,
    control_plane,
    start_instance,
)
from tests.integration.control_support import controlled_runtime

pytestmark = pytest.mark.redis_kinds("single", "cluster")

PER_SECOND = 10
WINDOWS = 10
EARLY_MS = 10


def tenants_file(tmp_path: Path, limits: dict[str, Any]) -> Path:
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps({"tenants": {}, "rateLimits": limits}), encoding="utf-8")
    return path


def limited_plane(hot_state: HotState, tmp_path: Path, limits: dict[str, Any]) -> ControlPlane:
    return control_plane(hot_state, scale_out_enabled=False, tenants_file=tenants_file(tmp_path, limits))


def flow_pipeline(name: str, flow: dict[str, Any]) -> PipelineDefinition:
    return parse_pipeline(
        {"name": name, "config": {"flow": flow}, "steps": [{"name": "only", "stepKey": "test.noop"}]}
    )


async def test_a_submit_limit_of_n_per_second_holds_in_every_window_from_three_clients(
    hot_state: HotState, redis_target: RedisTarget, tmp_path: Path
) -> None:
    """Three clients (each its own Redis connections and control plane) submit as fast as the
    limit lets them for 10 s, each trying again about when a refusal's retry_after_ms says:
    every 1 s window of the runs' creation times (server clock) holds N ± 1 runs."""
    limits = {"default": [{"name": "submits", "limit": PER_SECOND, "period": "1s"}]}
    states = [hot_state] + [
        connect_hot_state(redis_target.url, prefix=hot_state.prefix, partitions=hot_state.partition_count)
        for _ in range(2)
    ]
    planes = [limited_plane(state, tmp_path, limits) for state in states]
    start_ms = await hot_state.server_time_ms()
    refused = Counter[int]()

    async def client(n: int, plane: ControlPlane) -> list[str]:
        accepted: list[str] = []
        while await hot_state.server_time_ms() < start_ms + (WINDOWS + 1) * 1000:
            try:
                submitted = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
                accepted.append(submitted.shared_run_id)
            except RateLimitedError as limited:
                refused[n] += 1
                # A little before retry_after_ms: demand stays at the limit, so the windows
                # measure the limit rather than each client's lateness (a late unit is lost).
                await asyncio.sleep(max(1, limited.retry_after_ms - EARLY_MS) / 1000)
        return accepted

    try:
        runs = [r for rs in await asyncio.gather(*(client(n, p) for n, p in enumerate(planes))) for r in rs]
        records = await planes[0].parts.runs.get_many(runs)
        created = sorted(record.created_at_ms for record in records if record is not None)
        assert len(created) == len(runs)
        first = created[0]
        per_window = [
            sum(1 for at in created if first + w * 1000 <= at < first + (w + 1) * 1000)
            for w in range(WINDOWS)
        ]
        assert all(PER_SECOND - 1 <= count <= PER_SECOND + 1 for count in per_window), per_window
        assert all(refused[n] > 0 for n in range(3))  # every client was held back
        assert await planes[0].parts.queue.pending_count() == len(runs)  # refusals created nothing
    finally:
        for plane in planes:
            await plane.stop()
        for state in states[1:]:
            await state.close()


@pytest.mark.parametrize("mode", [SubmitMode.QUEUE_FIRST, SubmitMode.DIRECT_DISPATCH])
async def test_a_limited_submit_answers_rate_limited_with_the_time_to_retry_and_creates_nothing(
    hot_state: HotState, tmp_path: Path, mode: SubmitMode
) -> None:
    plane = limited_plane(
        hot_state, tmp_path, {DEFAULT_TENANT.tenant_id: [{"name": "hourly", "limit": 1, "period": "1h"}]}
    )
    try:
        await plane.submit(ONE_STEP, {}, mode, DEFAULT_TENANT)
        with pytest.raises(RateLimitedError) as refused:
            await plane.submit(ONE_STEP, {}, mode, DEFAULT_TENANT)
        assert 0 < refused.value.retry_after_ms <= 3_600_000
        text = tool_error_text("submit", refused.value)
        assert text.startswith("[rate_limited] ") and f"retry_after_ms={refused.value.retry_after_ms}" in text
        assert "'hourly' of tenant 'test-tenant' (1 per 1h)" in text
        listed = await plane.parts.runs.list_tenant(DEFAULT_TENANT.tenant_id)
        assert len(listed) == 1
        # Another tenant (the `default` entry: none here) is not limited by it.
        await plane.submit(ONE_STEP, {}, mode, OTHER_SHARED_TENANT)
    finally:
        await plane.stop()


async def test_a_pipeline_limit_counts_that_pipelines_runs_per_tenant(
    hot_state: HotState, tmp_path: Path
) -> None:
    plane = limited_plane(hot_state, tmp_path, {})
    limited = flow_pipeline("limited", {"rateLimits": [{"name": "runs", "limit": 1, "period": "1h"}]})
    try:
        await plane.submit(limited, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        with pytest.raises(RateLimitedError, match="'runs' of pipeline 'limited'"):
            await plane.submit(limited, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)  # another pipeline
        await plane.submit(limited, {}, SubmitMode.QUEUE_FIRST, OTHER_SHARED_TENANT)  # another tenant
        assert await plane.parts.queue.pending_count() == 3
    finally:
        await plane.stop()


async def test_a_retried_idempotent_submit_is_answered_even_when_the_limit_is_spent(
    hot_state: HotState, tmp_path: Path
) -> None:
    plane = limited_plane(hot_state, tmp_path, {"default": [{"name": "hourly", "limit": 1, "period": "1h"}]})
    try:
        first = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT, idempotency_key="k")
        again = await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT, idempotency_key="k")
        assert again.deduplicated and again.shared_run_id == first.shared_run_id
    finally:
        await plane.stop()


async def test_a_burst_lets_that_many_submits_go_at_once(hot_state: HotState, tmp_path: Path) -> None:
    plane = limited_plane(
        hot_state, tmp_path, {"default": [{"name": "b", "limit": 3, "period": "1h", "burst": 3}]}
    )
    try:
        for _ in range(3):
            await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        with pytest.raises(RateLimitedError):
            await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
    finally:
        await plane.stop()


@pytest.mark.parametrize(
    "limits",
    [
        {"default": [{"name": "x", "limit": 0, "period": "1s"}]},
        {"default": [{"name": "x", "limit": 1, "period": "1 minute"}]},
        {"default": [{"name": "x", "limit": 1, "period": "1s", "unknown": 1}]},
        {"default": [{"name": "x", "limit": 1, "period": "1s"}, {"name": "x", "limit": 2, "period": "1s"}]},
        {"default": {"name": "x"}},
    ],
)
async def test_an_invalid_tenants_rate_limit_is_a_configuration_error_at_load(
    hot_state: HotState, tmp_path: Path, limits: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError, match="rateLimits section"):
        limited_plane(hot_state, tmp_path, limits)


@pytest.mark.parametrize(
    "flow",
    [
        {"rateLimits": [{"name": "r", "limit": 1, "period": "forever"}]},
        {"rateLimit": []},
        {"concurrency": {"key": "customerId", "limit": 1}},
        {"concurrency": {"key": "input.customerId", "limit": 1, "strategy": "drop"}},
    ],
)
async def test_an_invalid_pipeline_flow_is_refused_at_submit_and_nothing_is_queued(
    hot_state: HotState, flow: dict[str, Any]
) -> None:
    plane = control_plane(hot_state, scale_out_enabled=False)
    try:
        with pytest.raises(InvalidPipelineError) as refused:
            await plane.submit(flow_pipeline("bad", flow), {}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT)
        assert refused.value.rule == "flow_valid"
        assert await plane.parts.queue.pending_count() == 0
    finally:
        await plane.stop()


def test_a_providers_file_budget_naming_an_unknown_provider_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "providers.json"
    path.write_text(
        json.dumps({"rate_limits": {"org-key": {"limit": 60, "period": "1m", "providers": ["nowhere"]}}}),
        encoding="utf-8",
    )
    with pytest.raises(ConfigurationError, match="nowhere"):
        load_provider_settings(path)


class CallingExecutor:
    """`test.call`: a step whose `config.provider` names a provider; notes the server time of
    each call and the attempt it was."""

    step_key = "test.call"

    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self.calls: list[tuple[int, int]] = []

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        self.calls.append((await self.hot_state.server_time_ms(), invocation.attempt))
        return {"data": {"step": invocation.step_name}}


async def test_a_rate_limited_step_waits_without_spending_an_attempt(hot_state: HotState) -> None:
    """Four parallel steps calling one provider whose key allows 2 calls per second: they run
    one every 500 ms (N ± 1 in any 1 s window), each on its first attempt; the ones
    held back were reported as `step.rate_limited`, not as failures."""
    executor = CallingExecutor(hot_state)
    runtime = controlled_runtime(hot_state, executor)
    budget = ProviderRateLimit(limit=2, period="1s", providers=("template",))
    runtime.engine.rate_limiter = StepRateLimiter(hot_state, ProviderRateLimits(budgets={"org-key": budget}))
    pipeline = parse_pipeline(
        {
            "name": "calls",
            "steps": [
                {"name": f"c{n}", "stepKey": "test.call", "config": {"provider": "template"}}
                for n in range(4)
            ],
        }
    )
    execution_id = await runtime.engine.create_execution(pipeline, {}, DEFAULT_TENANT)
    assert await runtime.engine.run(execution_id, workers=4) == "Completed"
    times = sorted(at for at, _ in executor.calls)
    assert len(times) == 4 and {attempt for _, attempt in executor.calls} == {0}
    assert all(sum(1 for t in times if start <= t < start + 1000) <= 2 + 1 for start in times)
    limited = runtime.observer.named("step.rate_limited")
    assert limited and {event.attributes["budget"] for event in limited} == {"org-key"}
    assert not runtime.observer.named("step.failed")


async def test_a_tenant_dispatch_limit_paces_its_runs_without_holding_back_others(
    hot_state: HotState, tmp_path: Path
) -> None:
    """`"at": "dispatch"`: every submit is accepted, and the tenant's runs are dispatched at most
    N per second (N ± 1 in each 1 s window of their dispatch times), in queue order; another
    tenant's runs queued after them are dispatched at once, not behind them."""
    limits = {DEFAULT_TENANT.tenant_id: [{"name": "paced", "limit": 5, "period": "1s", "at": "dispatch"}]}
    plane = control_plane(
        hot_state, background_pump=True, scale_out_enabled=False, tenants_file=tenants_file(tmp_path, limits)
    )
    await start_instance(plane, max_concurrent_runs=40, worker_count=8)
    try:
        await plane.start()
        paced = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, DEFAULT_TENANT)) for _ in range(20)
        ]
        assert {result.status for result in paced} == {SharedRunStatus.QUEUED_GLOBALLY}  # queued, not refused
        others = [
            (await plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, OTHER_SHARED_TENANT)).shared_run_id
            for _ in range(5)
        ]

        async def dispatched(run_ids: list[str]) -> list[int]:
            records = await plane.parts.runs.get_many(run_ids)
            return [r.dispatched_at_ms for r in records if r is not None and r.dispatched_at_ms]

        async def others_dispatched() -> bool:
            return len(await dispatched(others)) == len(others)

        await wait_until(others_dispatched, timeout=30, interval=0.05)
        paced_ids = [result.shared_run_id for result in paced]
        assert len(await dispatched(paced_ids)) < len(paced_ids)  # the others did not wait for them

        async def all_paced_dispatched() -> bool:
            return len(await dispatched(paced_ids)) == len(paced_ids)

        await wait_until(all_paced_dispatched, timeout=30, interval=0.05)
        records = [r for r in await plane.parts.runs.get_many(paced_ids) if r is not None]
        assert [r.shared_run_id for r in sorted(records, key=lambda r: r.dispatched_at_ms or 0)] == paced_ids
        times = sorted(await dispatched(paced_ids))
        first = times[0]
        per_window = [
            sum(1 for t in times if first + w * 1000 <= t < first + (w + 1) * 1000) for w in range(3)
        ]
        assert all(4 <= count <= 6 for count in per_window), per_window
    finally:
        await plane.stop()
