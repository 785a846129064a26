"""Builders shared by the lifecycle tests: a runtime whose finished runs are archived, runs driven
to their end through the control plane, and reads of what a run left in Redis."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from runtime_core.bootstrap import RuntimeSettings
from runtime_core.control_plane import ControlPlane, ControlPlaneSettings, RunStatusView, run_is_done
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import DurableRetention, HotStateRetention, LifecycleSettings
from runtime_core.pipeline import PipelineDefinition
from runtime_core.queueing import SubmitMode
from tests.helpers import wait_until


def lifecycle_runtime(
    redis_url: str, data_dir: Path, hot: HotStateRetention, **control_plane: Any
) -> RuntimeSettings:
    """One in-process instance, a private key prefix, the given hot-state lifecycle."""
    return RuntimeSettings(
        redis_url=redis_url,
        redis_prefix=f"lc{secrets.token_hex(4)}:",
        data_dir=data_dir,
        control_plane=ControlPlaneSettings(
            **{"workers_per_instance": 4, **control_plane},
            lifecycle=LifecycleSettings(hot=hot, durable=DurableRetention()),
        ),
    )


async def submit_queued(
    plane: ControlPlane, pipeline: PipelineDefinition, snapshot: ExecutionContextSnapshot
) -> str:
    return (await plane.submit(pipeline, {}, SubmitMode.QUEUE_FIRST, snapshot)).shared_run_id


async def finish(
    plane: ControlPlane, shared_run_id: str, snapshot: ExecutionContextSnapshot
) -> RunStatusView:
    """Drain until the run is dispatched, then wait until run.status says done."""

    async def done() -> bool:
        if not plane.settings.background_pump:
            await plane.drain(50, snapshot)
        return run_is_done(await plane.run_status(shared_run_id, snapshot))

    await wait_until(done, timeout=30, interval=0.02)
    return await plane.run_status(shared_run_id, snapshot)


async def run_to_end(
    plane: ControlPlane, pipeline: PipelineDefinition, snapshot: ExecutionContextSnapshot
) -> RunStatusView:
    return await finish(plane, await submit_queued(plane, pipeline, snapshot), snapshot)


async def existing_keys(hot_state: HotState, keys: list[str]) -> list[str]:
    pipe = hot_state.redis.pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    return [key for key, found in zip(keys, await pipe.execute(), strict=True) if found]


def comparable(view: RunStatusView) -> dict[str, Any]:
    """What must not change when the hot state of a finished run is retired.

    `effective_workers` is a live figure of the instance that ran it (the workers it last
    held), not part of the run's outcome, and `requested_id` is the caller's own input.
    """
    return view.model_dump(exclude={"requested_id", "effective_workers"})
