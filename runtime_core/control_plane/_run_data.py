"""RunDataReader: a run's input and its steps' outputs, for views that show them.

Owns finding, for any id of a run of the caller's tenant, the input it was submitted with and
the results (decoded: payload references resolved) of the steps asked for: from its
execution's hot state while it exists, else from its terminal snapshot, else (a run not
dispatched yet) from the shared run's request. The lookup is tenant-checked by the
RunLocator, so foreign and unknown ids raise the same NotFoundError. Must not change any
state, and must not decide what may be shown (callers redact).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from runtime_core.control_plane._parts import ControlPlaneParts
from runtime_core.control_plane._run_access import LocatedRun, RunLocator
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot


@dataclass(frozen=True)
class RunData:
    """`input` None and `source` "none": neither the execution nor its snapshot is kept any more."""

    input: Any
    outputs: dict[str, Any] = field(default_factory=dict)
    source: str = "none"  # execution | snapshot | request | none


class RunDataReader:
    def __init__(self, parts: ControlPlaneParts, locator: RunLocator) -> None:
        self.parts = parts
        self.locator = locator

    async def read(
        self, any_id: str, caller: ExecutionContextSnapshot, step_names: Collection[str] = ()
    ) -> RunData:
        located = await self.locator.locate(any_id, caller)
        with restored_snapshot(located.snapshot):
            if located.execution_id:
                stored = await self._stored(located, step_names)
                if stored is not None:
                    state, results, source = stored
                    outputs = await self._decoded(located, results)
                    return RunData(input=state, outputs=outputs, source=source)
            if located.shared is not None:
                return RunData(input=located.shared.input, source="request")
        return RunData(input=None)

    async def _stored(
        self, located: LocatedRun, step_names: Collection[str]
    ) -> tuple[Any, dict[str, Any], str] | None:
        """(input, stored results of the wanted steps, source) from hot state, else the snapshot."""
        execution_id, wanted = located.execution_id or "", set(step_names)
        if located.archived is None:
            execution = await self.parts.dag_store.read_execution(execution_id)
            if execution is not None:
                results = {
                    s.name: s.result for s in execution.steps if s.name in wanted and s.result is not None
                }
                return execution.meta.state, results, "execution"
        if self.parts.durable is None:
            return None
        terminal = await self.parts.durable.get_snapshot(execution_id, located.snapshot.tenant_id)
        if terminal is None:
            return None
        document = terminal.snapshot
        steps = document.get("steps", [])
        results = {
            s["name"]: s["result"] for s in steps if s.get("name") in wanted and s.get("result") is not None
        }
        return document.get("state"), results, "snapshot"

    async def _decoded(self, located: LocatedRun, results: dict[str, Any]) -> dict[str, Any]:
        if not results:
            return {}
        codec = self.parts.engine.results
        return dict(await codec.decode(located.execution_id or "", results, located.snapshot))
