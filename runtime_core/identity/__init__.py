"""Identity types and the execution context.

Owns the prefixed id types (SharedRunId, LocalRunId, ExecutionId, RuntimeInstanceId, TaskId), the
frozen ExecutionContextSnapshot and the context-variable helper that restores it around
tenant-sensitive work. Must not read tenants from anywhere but the snapshot.
"""

from runtime_core.identity._context import (
    current_snapshot,
    require_snapshot,
    restored_snapshot,
)
from runtime_core.identity._ids import (
    ExecutionId,
    LocalRunId,
    RuntimeInstanceId,
    SharedRunId,
    TaskId,
    new_claim_token,
    new_execution_id,
    new_incarnation_id,
    new_local_run_id,
    new_runtime_instance_id,
    new_shared_run_id,
    new_task_id,
    parse_any_run_id,
    shared_run_partition,
)
from runtime_core.identity._snapshot import (
    PARENT_CALL_ATTRIBUTE,
    PARENT_EXECUTION_ATTRIBUTE,
    PARENT_STEP_ATTRIBUTE,
    ExecutionContextSnapshot,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Context
    "ExecutionContextSnapshot",
    # A child run's snapshot attributes (ExecutionContextSnapshot.for_child)
    "PARENT_CALL_ATTRIBUTE",
    "PARENT_EXECUTION_ATTRIBUTE",
    "PARENT_STEP_ATTRIBUTE",
    # Ids
    "ExecutionId",
    "LocalRunId",
    "RuntimeInstanceId",
    "SharedRunId",
    "TaskId",
    "current_snapshot",
    "new_claim_token",
    "new_execution_id",
    "new_incarnation_id",
    "new_local_run_id",
    "new_runtime_instance_id",
    "new_shared_run_id",
    "new_task_id",
    "parse_any_run_id",
    "require_snapshot",
    "restored_snapshot",
    "shared_run_partition",
]
