"""The runtime services behind the tools, and the full list of tool specs.

Owns picking, out of a started RuntimeServices, the one runtime_core service each tool group
calls, plus the pipeline catalog, the task service behind MCP Tasks (None: no Tasks), the
registered step types' descriptions and the tenants' MCP servers (`steps.list`, the `step://`
resource), the schedule service, the bulk run actions, the run-event subscriber behind run
notifications and submit progress (None: neither), the run view reader over the same services
(the MCP Apps view and the dashboard), and the process's metrics exposition. Must not call
them: the tool groups do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_runtime._audit_tools import AuditTools
from mcp_runtime._bulk_tools import BulkTools
from mcp_runtime._capacity_tools import CapacityTools
from mcp_runtime._control_tools import ControlTools
from mcp_runtime._listing_tools import RunListTools
from mcp_runtime._pipeline_tools import PipelineTools
from mcp_runtime._recovery_tools import RecoveryTools
from mcp_runtime._registration import ToolSpec
from mcp_runtime._run_tools import RunTools
from mcp_runtime._schedule_tools import ScheduleTools
from mcp_runtime._step_tools import StepDescriber, StepTools, no_steps
from mcp_runtime.notifications import RunProgress
from mcp_runtime.run_view import RunViewReader
from runtime_core.audit import AuditQueries, ReplayService
from runtime_core.bootstrap import RuntimeServices
from runtime_core.bulk_actions import BulkRunActions, BulkSettings
from runtime_core.control import ExecutionControlService
from runtime_core.control_plane import ControlPlane
from runtime_core.events import RunEventSubscriber
from runtime_core.observability import MetricsExposition
from runtime_core.pipeline import PipelineCatalog
from runtime_core.queueing import PipelineValidator, TenantPipelineCheck
from runtime_core.recovery import RecoveryReports
from runtime_core.scheduling import ScheduleService
from runtime_core.steps import McpServers, named_environment_variables
from runtime_core.tasks import TaskService, TaskSettings, TaskStore


@dataclass(frozen=True)
class ToolBackend:
    catalog: PipelineCatalog
    validate_pipeline: PipelineValidator
    control_plane: ControlPlane
    control: ExecutionControlService
    replay: ReplayService
    audit: AuditQueries
    tasks: TaskService | None = None
    # The process's metrics (None: MCP requests are traced but not measured).
    metrics: MetricsExposition | None = None
    describe_steps: StepDescriber = no_steps
    run_events: RunEventSubscriber | None = None
    # The schedules behind `schedules.*` (None: those tools answer that schedules are off).
    schedules: ScheduleService | None = None
    # Dead letters and bulk actions behind `runs.failed / retry / cancel` (None: those tools are off).
    bulk: BulkRunActions | None = None
    # The submit-time checks for the caller's tenant (`pipelines.validate`; submit makes them itself).
    check_for_tenant: TenantPipelineCheck | None = None
    # Each tenant's MCP servers, whose tools `steps.list` shows (None: none configured here).
    mcp_servers: McpServers | None = None
    # What recovery did to each run, behind `recovery.report` (None: an empty report).
    recovery_reports: RecoveryReports | None = None
    # Names of the environment variables holding this process's secrets (providers, webhooks):
    # views redact their values wherever they appear.
    secret_variables: frozenset[str] = frozenset()

    @classmethod
    def from_services(cls, services: RuntimeServices, catalog: PipelineCatalog) -> ToolBackend:
        return cls(
            catalog=catalog,
            validate_pipeline=services.engine.validate,
            control_plane=services.control_plane,
            control=services.control,
            replay=services.audit.replay,
            audit=services.audit.queries,
            tasks=TaskService(
                TaskStore(services.hot_state),
                services.control_plane,
                services.control,
                services.engine,
                TaskSettings.from_env(),
            ),
            metrics=services.metrics,
            describe_steps=services.executors.describe,
            run_events=services.run_events,
            schedules=services.scheduling.service,
            bulk=BulkRunActions(
                services.control_plane, services.audit.queries, services.audit.ledger, BulkSettings.from_env()
            ),
            check_for_tenant=services.engine.check_for_tenant,
            mcp_servers=services.step_providers.mcp,
            recovery_reports=RecoveryReports(services.audit.queries),
            secret_variables=frozenset(
                [
                    *(
                        variable
                        for _, variable, _ in named_environment_variables(services.settings.step_providers())
                    ),
                    *services.control_plane.parts.webhooks.secret_variables(),
                ]
            ),
        )

    def run_view_reader(self) -> RunViewReader:
        return RunViewReader(self.control_plane, self.audit, self.tasks)

    def tool_specs(self) -> list[ToolSpec[Any, Any]]:
        progress = RunProgress(self.run_events, self.control_plane) if self.run_events else None
        runs = RunTools(self.control_plane, self.catalog, progress)
        return [
            *runs.specs(),
            *RunListTools(self.control_plane).specs(),
            *CapacityTools(self.control_plane).specs(),
            *ControlTools(self.control).specs(),
            *AuditTools(self.replay, self.audit, runs.execution_id_for).specs(),
            *RecoveryTools(self.recovery_reports).specs(),
            *PipelineTools(self.catalog, self.validate_pipeline, self.check_for_tenant).specs(),
            *StepTools(self.describe_steps, self.mcp_servers).specs(),
            *ScheduleTools(self.schedules, self.catalog).specs(),
            *BulkTools(self.bulk).specs(),
        ]
