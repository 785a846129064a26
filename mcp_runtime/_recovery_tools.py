"""Tool `recovery.report` and resource `recovery://report/{instance}`: what recovery did to your runs.

Owns shaping `RecoveryReports` (runtime_core.recovery) into the tool answer and the resource,
both for the caller's tenant only: after a process restart, a lost runtime instance or a lost
Redis dataset, each incident with what happened to each run (resumed on the same ExecutionId,
redispatched under the same SharedRunId, restored from its durable copy, failed as lost), its
timings, and the calls to peers that were uncertain with how each was settled. Must not read
evidence itself.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from mcp_runtime._guard import ToolGuard
from mcp_runtime._inputs import MAX_ID_LENGTH, ToolInput
from mcp_runtime._outputs import ToolOutput
from mcp_runtime._registration import ToolCall, ToolSpec
from runtime_core.recovery import RecoveryIncident, RecoveryReports, ReportCounts

TOOL_NAME = "recovery.report"
RESOURCE_URI = "recovery://report/{instance}"
ALL_INSTANCES = "all"


class RecoveryReportInput(ToolInput):
    since: datetime | None = Field(None, description="Only recovery done at or after this time (ISO 8601).")
    runtime_instance_id: str | None = Field(
        None, max_length=MAX_ID_LENGTH, description="Only incidents of this runtime instance (rt_...)."
    )
    max_incidents: int = Field(20, ge=1, le=100, description="The most recent incidents to report.")


class RecoveryReportOutput(ToolOutput):
    tenant_id: str
    incidents: list[RecoveryIncident] = Field(
        description="Most recent first: cause (instance_lost, process_restarted, hot_state_lost), the "
        "runtime instance, when it was judged dead, how long recovery took, counts, and each run."
    )
    counts: ReportCounts = Field(description="Totals over the incidents reported.")


class RecoveryTools:
    def __init__(self, reports: RecoveryReports | None) -> None:
        self._reports = reports

    async def report(self, request: RecoveryReportInput, call: ToolCall) -> RecoveryReportOutput:
        if self._reports is None:
            return RecoveryReportOutput(
                tenant_id=call.snapshot.tenant_id, incidents=[], counts=ReportCounts()
            )
        report = await self._reports.report(
            call.snapshot,
            since=request.since,
            runtime_instance_id=request.runtime_instance_id,
            max_incidents=request.max_incidents,
        )
        return RecoveryReportOutput.model_validate(report.model_dump())

    def specs(self) -> list[ToolSpec[Any, Any]]:
        return [
            ToolSpec(
                name=TOOL_NAME,
                title="Recovery report",
                description=(
                    "What recovery did to your tenant's runs after a process restart, a lost runtime "
                    "instance or a lost Redis dataset: per incident, each run resumed (same ExecutionId), "
                    "redispatched (same SharedRunId), restored or failed as lost, with timings and final "
                    "status, and every call to a peer that may have taken effect (uncertain) with how its "
                    "policy settled it (retried, reconciled, failed, a human's answer). Empty: no recovery."
                ),
                input_model=RecoveryReportInput,
                output_model=RecoveryReportOutput,
                handler=self.report,
                read_only=True,
                idempotent=True,
            )
        ]


def register_recovery_resources(server: MCPServer, reports: RecoveryReports | None, guard: ToolGuard) -> None:
    @server.resource(
        RESOURCE_URI,
        name="recovery-report",
        title="Recovery report",
        description="The recovery report of your tenant, as the recovery.report tool answers it: "
        "recovery://report/all, or recovery://report/<runtime instance id> for one instance's incidents.",
        mime_type="application/json",
    )
    async def recovery_report(instance: str, ctx: Context) -> str:
        snapshot = guard.admit(TOOL_NAME, ctx)
        request = RecoveryReportInput(runtime_instance_id=None if instance == ALL_INSTANCES else instance)
        answer = await RecoveryTools(reports).report(request, ToolCall(snapshot=snapshot, ctx=ctx))
        return json.dumps(answer.model_dump(mode="json"), indent=2)
