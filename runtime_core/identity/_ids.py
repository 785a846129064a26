"""Prefixed identifiers. Each kind is its own `str` subtype so they are never collapsed."""

from __future__ import annotations

import secrets
import time
from typing import NewType

SharedRunId = NewType("SharedRunId", str)
LocalRunId = NewType("LocalRunId", str)
ExecutionId = NewType("ExecutionId", str)
RuntimeInstanceId = NewType("RuntimeInstanceId", str)
TaskId = NewType("TaskId", str)

SHARED_RUN_PREFIX = "srun_"
LOCAL_RUN_PREFIX = "lrun_"
EXECUTION_PREFIX = "exec_"
RUNTIME_INSTANCE_PREFIX = "rt_"
INCARNATION_PREFIX = "inc_"
TASK_PREFIX = "task_"


def _sortable_suffix() -> str:
    # Millisecond time first keeps ids roughly creation-ordered for humans reading logs.
    return f"{int(time.time() * 1000):012x}{secrets.token_hex(6)}"


SHARED_RUN_PARTITION_MARK = "-p"
"""A shared run id of queue partition k > 0 ends in "-p<k>", so the id alone locates its record;
ids without the mark (partition 0, and every id of an unpartitioned queue) are unchanged."""


def new_shared_run_id(partition: int = 0) -> SharedRunId:
    mark = f"{SHARED_RUN_PARTITION_MARK}{partition}" if partition else ""
    return SharedRunId(SHARED_RUN_PREFIX + _sortable_suffix() + mark)


def shared_run_partition(shared_run_id: str, partitions: int) -> int:
    """The queue partition a shared run id names (0 when unmarked or outside 0..partitions-1)."""
    _, mark, number = shared_run_id.rpartition(SHARED_RUN_PARTITION_MARK)
    if not mark or not number.isdigit() or not number.isascii():
        return 0
    partition = int(number)
    return partition if partition < partitions else 0


def new_local_run_id() -> LocalRunId:
    return LocalRunId(LOCAL_RUN_PREFIX + _sortable_suffix())


def new_execution_id() -> ExecutionId:
    return ExecutionId(EXECUTION_PREFIX + _sortable_suffix())


def new_runtime_instance_id(prefix: str = "") -> RuntimeInstanceId:
    middle = f"{prefix.strip('-_')}_" if prefix else ""
    return RuntimeInstanceId(f"{RUNTIME_INSTANCE_PREFIX}{middle}{secrets.token_hex(5)}")


def new_incarnation_id() -> str:
    """One start of a runtime instance (or control plane): its registration, never its identity."""
    return INCARNATION_PREFIX + _sortable_suffix()


def new_task_id() -> TaskId:
    """An MCP task id: 128 random bits and no clock part, so it cannot be guessed or enumerated."""
    return TaskId(TASK_PREFIX + secrets.token_hex(16))


def new_claim_token() -> str:
    return secrets.token_hex(12)


def parse_any_run_id(value: str) -> tuple[str, str]:
    """Classify an id by prefix: returns (kind, id) with kind shared|local|execution."""
    for kind, prefix in (
        ("shared", SHARED_RUN_PREFIX),
        ("local", LOCAL_RUN_PREFIX),
        ("execution", EXECUTION_PREFIX),
    ):
        if value.startswith(prefix):
            return kind, value
    return "unknown", value
