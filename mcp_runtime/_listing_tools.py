"""Tool `runs.list`: the caller's tenant's runs, newest first, filtered and paged by cursor.

Owns turning the tool arguments into a RunListQuery and the RunListPage into the tool answer.
Must not read any store: the control plane's run catalog does, tenant-scoped by the caller's
snapshot (runs of other tenants are never listed).
"""

from __future__ import annotations

from typing import Any

from mcp_runtime._inputs import RunsListInput
from mcp_runtime._outputs import RunsListOutput
from mcp_runtime._registration import ToolCall, ToolSpec
from runtime_core.control_plane import ControlPlane
from runtime_core.lifecycle import RunListQuery


class RunListTools:
    def __init__(self, control_plane: ControlPlane) -> None:
        self._control_plane = control_plane

    async def list_runs(self, request: RunsListInput, call: ToolCall) -> RunsListOutput:
        query = RunListQuery.model_validate(request.model_dump())
        page = await self._control_plane.list_runs(query, call.snapshot)
        return RunsListOutput.model_validate(page.model_dump())

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name="runs.list",
                title="List runs",
                description=(
                    "Your tenant's runs, newest first: queued, running and finished alike (finished runs "
                    "whose hot state was cleaned up are read from the durable store). Filter by shared "
                    "status, overall status, pipeline, submitting user and submission time window; page "
                    "with `limit` and the returned `next_cursor` (older) / `prev_cursor` (newer). Each "
                    "row names the run's ids for run.status, ledger and trace."
                ),
                input_model=RunsListInput,
                output_model=RunsListOutput,
                handler=self.list_runs,
                read_only=True,
                idempotent=True,
            )
        ]
