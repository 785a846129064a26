"""Resolved views and their fingerprint: one function for live state and for snapshots.

Owns turning a view's hot results (inline, payload refs or evicted) into stored forms and
into resolved results, and `fingerprint_view`, the terminal fingerprint over resolved
results, so compaction, eviction and externalization never change it. Must not write.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from runtime_core.dag import ExecutionView, StepStatus, StepView, execution_fingerprint
from runtime_core.retention import PayloadResolver, tenant_of


async def stored_results(view: ExecutionView, resolver: PayloadResolver) -> dict[str, Any]:
    """Each step's stored form; a Completed result missing from Redis comes from its archive."""
    hot = {step.name: step.result for step in view.steps if step.status == StepStatus.COMPLETED}
    return await resolver.stored_forms(view.meta.execution_id, hot, tenant_of(view.meta.snapshot))


async def resolve_view(
    view: ExecutionView, resolver: PayloadResolver, stored: dict[str, Any] | None = None
) -> ExecutionView:
    """The same view with every Completed result rehydrated (ResolverError when impossible);
    `stored`: the view's `stored_results`, when the caller has them."""
    execution_id, tenant_id = view.meta.execution_id, tenant_of(view.meta.snapshot)
    if stored is None:
        stored = await stored_results(view, resolver)
    resolved = {
        name: await resolver.resolve_stored(execution_id, name, value, tenant_id)
        for name, value in stored.items()
    }
    # Only a step whose result resolved to another value is copied: an inline result resolves
    # to itself, and copying 9,000 frozen views cost ~0.35 s at the end of a wide run.
    steps = [_with_result(step, resolved.get(step.name, step.result)) for step in view.steps]
    return ExecutionView(view.meta, steps, view.control_status)


async def fingerprint_view(
    view: ExecutionView, resolver: PayloadResolver, stored: dict[str, Any] | None = None
) -> str:
    """`execution_fingerprint` of the resolved view: use it for live views and snapshot views
    (`stored`: as for `resolve_view`)."""
    return execution_fingerprint(await resolve_view(view, resolver, stored))


def _with_result(step: StepView, result: Any) -> StepView:
    return step if result is step.result else replace(step, result=result)
