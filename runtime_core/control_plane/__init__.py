"""The control plane facade over shared runs, the shared queue and runtime instances.

Owns `ControlPlane` (submit, drain, list_instances, tenant_capacity, queue_depth, run_status,
run_pipeline, run_data, list / count runs, cancel, pause / resume a local queue; every call
takes the caller's ExecutionContextSnapshot), its settings, its result models and the
tenant-checked run lookup. MCP tools and the CLI call this; it knows nothing of MCP.
"""

from runtime_core.control_plane._cancellation import RunCanceller
from runtime_core.control_plane._control_plane import ControlPlane
from runtime_core.control_plane._drain import DrainProgress
from runtime_core.control_plane._parts import ControlPlaneParts, build_parts
from runtime_core.control_plane._run_access import LocatedRun, RunLocator
from runtime_core.control_plane._run_data import RunData, RunDataReader
from runtime_core.control_plane._run_pipeline import RunPipelineReader
from runtime_core.control_plane._run_status import RunStatusReader
from runtime_core.control_plane._settings import ControlPlaneSettings
from runtime_core.control_plane._tenants_file import TenantsFile
from runtime_core.control_plane._views import (
    DEFAULT_STEP_PAGE_SIZE,
    MAX_STEP_PAGE_SIZE,
    TERMINAL_RUN_STATUSES,
    AssistantView,
    CancelResult,
    DrainedRun,
    DrainResult,
    InstanceView,
    RunStatusView,
    StepErrorView,
    StepPage,
    StepRow,
    TenantCapacityView,
    run_final_status,
    run_is_done,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Facade
    "ControlPlane",
    "ControlPlaneSettings",
    "TenantsFile",
    "ControlPlaneParts",
    "build_parts",
    "DrainProgress",
    # Results
    "CancelResult",
    "DrainResult",
    "DrainedRun",
    "InstanceView",
    "TenantCapacityView",
    "AssistantView",
    "RunStatusView",
    "StepPage",
    "DEFAULT_STEP_PAGE_SIZE",
    "MAX_STEP_PAGE_SIZE",
    "StepRow",
    "StepErrorView",
    "run_is_done",
    "run_final_status",
    "TERMINAL_RUN_STATUSES",
    # Run lookup and the queries / actions on one run
    "RunLocator",
    "LocatedRun",
    "RunStatusReader",
    "RunPipelineReader",
    "RunDataReader",
    "RunData",
    "RunCanceller",
]
