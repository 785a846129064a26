"""Runtime instances: local queue + background controller + workers, and what admission needs.

Owns the in-process runtime instance (RunId lifecycle, worker accounting, queue control,
heartbeats, its incarnation: registration take-over, fencing, rejoining a lost dataset),
the Redis registry and capacity descriptors, tenant runtime settings and the
visibility evaluator, the admission controller and its Lua reservations, the run-execution
index, the in-process instance pool and the local scaler, the control-plane discovery
record, and the host manager that starts runtime-instance processes. Must not own workflow
truth (the DAG engine does) nor know about the shared queue or providers.
"""

from runtime_core.instances._admission import (
    AdmissionCandidate,
    AdmissionController,
    AdmissionDecision,
    AdmissionKind,
    admission_group,
    admission_group_tenant,
)
from runtime_core.instances._dependencies import ExecutionCanceller, InstanceDependencies, LostStateRestorer
from runtime_core.instances._discovery import ControlPlaneDescriptor, ControlPlaneDiscovery
from runtime_core.instances._doorbell import UnparkDoorbell
from runtime_core.instances._host_manager import (
    PORT_TAKEN_EXIT_CODE,
    HostedProcess,
    HostLaunch,
    HostManagerSettings,
    HostStartError,
    HostTransport,
    RuntimeHostManager,
    hosted_instance_ids,
)
from runtime_core.instances._instance import RuntimeInstance
from runtime_core.instances._models import (
    DISPATCH_ATTEMPT_KEY,
    HOT_STATE_LOST,
    PROVIDER_NAME_KEY,
    TARGET_INCARNATION_KEY,
    TRANSPORT_ENDPOINT_KEY,
    TRANSPORT_NAME_KEY,
    CapacityDescriptor,
    InstanceDescriptor,
    InstanceEntry,
    InstanceHealth,
    LocalRunRequest,
    LocalRunStatus,
    LocalRunView,
    QueueStateView,
    RuntimeInstanceSettings,
)
from runtime_core.instances._pool import LocalInstancePool
from runtime_core.instances._registry import (
    DEFAULT_STALE_AFTER_MS,
    Heartbeat,
    HeartbeatOutcome,
    InstanceRegistry,
    RetireOutcome,
)
from runtime_core.instances._reservations import Reservation, ReservationOutcome, ReservationStore
from runtime_core.instances._run_events import announce_end
from runtime_core.instances._run_index import (
    ABANDONED_ATTEMPT,
    RecordSwap,
    RunExecutionIndex,
    RunIndexRecord,
    run_not_found,
)
from runtime_core.instances._scaler import LocalInstanceScaler, ScaleOutOutcome, local_instance_id
from runtime_core.instances._tenants import IsolationMode, TenantRuntimeSettings, TenantSettingsCatalog
from runtime_core.instances._visibility import is_instance_visible, owner_matches

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Runtime instance
    "RuntimeInstance",
    "RuntimeInstanceSettings",
    "InstanceDependencies",
    "ExecutionCanceller",
    "LostStateRestorer",
    "UnparkDoorbell",
    "LocalRunRequest",
    "DISPATCH_ATTEMPT_KEY",
    "TARGET_INCARNATION_KEY",
    "HOT_STATE_LOST",
    "LocalRunStatus",
    "LocalRunView",
    "QueueStateView",
    # Registry and capacity
    "InstanceRegistry",
    "Heartbeat",
    "HeartbeatOutcome",
    "RetireOutcome",
    "InstanceDescriptor",
    "CapacityDescriptor",
    "InstanceEntry",
    "InstanceHealth",
    "DEFAULT_STALE_AFTER_MS",
    "PROVIDER_NAME_KEY",
    "TRANSPORT_NAME_KEY",
    "TRANSPORT_ENDPOINT_KEY",
    # Tenants and visibility
    "IsolationMode",
    "TenantRuntimeSettings",
    "TenantSettingsCatalog",
    "is_instance_visible",
    "owner_matches",
    # Admission and reservations
    "AdmissionController",
    "admission_group",
    "admission_group_tenant",
    "AdmissionCandidate",
    "AdmissionDecision",
    "AdmissionKind",
    "ReservationStore",
    "Reservation",
    "ReservationOutcome",
    # Run-execution index
    "RunExecutionIndex",
    "RunIndexRecord",
    "RecordSwap",
    "ABANDONED_ATTEMPT",
    "run_not_found",
    "announce_end",
    # Local hosting and scale-out
    "LocalInstancePool",
    "LocalInstanceScaler",
    "ScaleOutOutcome",
    "local_instance_id",
    # Control-plane discovery and runtime-instance processes
    "ControlPlaneDiscovery",
    "ControlPlaneDescriptor",
    "RuntimeHostManager",
    "HostManagerSettings",
    "HostLaunch",
    "PORT_TAKEN_EXIT_CODE",
    "HostedProcess",
    "HostTransport",
    "HostStartError",
    "hosted_instance_ids",
]
