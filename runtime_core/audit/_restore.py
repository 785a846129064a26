"""Restoring an ExecutionDocument into Redis: the plan and the `restore_execution` wrapper.

Owns the replay normalization (Running -> Ready with claims cleared, Completed and Failed
kept, WaitingForRetry eligible at once, Pending/Ready recomputed from dependencies) and the
only code that knows `lua/restore_execution.lua`'s KEYS/ARGV order. Must not decide where a
document comes from.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from runtime_core.audit._document import ExecutionDocument, StepDocument
from runtime_core.dag import DagStore, ExecutionStatus, StepStatus
from runtime_core.pipeline import PipelineDefinition, parse_pipeline, steps_read_by
from runtime_core.steps import canonical_json

_KEPT_STATUSES = (StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.WAITING_FOR_RETRY)


class RestoreOutcome(Enum):
    RESTORED = 1
    ALREADY_EXISTS = 0


def _children(pipeline: PipelineDefinition) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {step.name: [] for step in pipeline.steps}
    for step in pipeline.steps:
        for dep in step.depends_on:
            children[dep].append(step.name)
    return children


def _restored_status(step: StepDocument, pending: int) -> str:
    if step.status in _KEPT_STATUSES:
        return step.status
    return StepStatus.READY if pending == 0 else StepStatus.PENDING


def restore_plan(document: ExecutionDocument) -> list[dict[str, Any]]:
    """One entry per step, in the shape `restore_execution.lua` reads."""
    pipeline = parse_pipeline(document.pipeline)
    children = _children(pipeline)
    by_name = {step.name: step for step in document.steps}
    completed = {step.name for step in document.steps if step.status == StepStatus.COMPLETED}
    running = document.status == ExecutionStatus.RUNNING
    plan = []
    for definition in pipeline.steps:
        step = by_name.get(definition.name) or StepDocument(
            name=definition.name, step_key=definition.step_key, status=StepStatus.PENDING
        )
        pending = sum(1 for dep in definition.depends_on if dep not in completed)
        status = _restored_status(step, pending)
        entry: dict[str, Any] = {
            "name": definition.name,
            "status": status,
            "pending": pending,
            "children": json.dumps(children[definition.name]),
            "needs": json.dumps(steps_read_by(definition)),
            "retries": step.retry_count,
            "recoveries": step.recovery_count,
        }
        if status == StepStatus.COMPLETED:
            entry["result"] = canonical_json(step.result)
        if step.error is not None:
            entry["error"] = canonical_json(step.error)
        if running and status in (StepStatus.READY, StepStatus.WAITING_FOR_RETRY):
            entry["ready"] = 0
        plan.append(entry)
    return plan


async def restore_execution(dag_store: DagStore, document: ExecutionDocument) -> RestoreOutcome:
    keys = dag_store.keys(document.execution_id)
    reply = await dag_store.hot_state.scripts["restore_execution"](
        keys=[
            keys.meta,
            keys.status,
            keys.pending,
            keys.children,
            keys.ready,
            keys.needs,
            keys.result,
            keys.retries,
            keys.recoveries,
            keys.error,
            keys.running,
            keys.token,
            keys.claimed,
        ],
        args=[json.dumps(document.meta_fields()), json.dumps(restore_plan(document))],
    )
    return RestoreOutcome(int(reply[0]))
