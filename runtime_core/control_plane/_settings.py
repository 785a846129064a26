"""ControlPlaneSettings: one typed config object for the control plane and its local instances."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import BaseModel, Field

from runtime_core.lifecycle import LifecycleSettings
from runtime_core.queueing import DEFAULT_IDEMPOTENCY_WINDOW_MS, SubmitMode
from runtime_core.recovery import DEFAULT_FENCE_RETENTION_MS, DEFAULT_HEALTH_WINDOW_MS


def _default_host() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


class ControlPlaneSettings(BaseModel):
    """Sizes of the in-process runtime instances, pump / watcher cadence, TTLs and tenants file.

    `health_window_ms`: a heartbeat older than this marks an instance Unsafe; the health and
    recovery reconcilers run every `health_check_interval_ms` / `recovery_interval_ms`.
    `lifecycle`: when finished runs leave Redis and how long the durable store keeps records.
    `idempotency_window_ms`: how long a submit's idempotency key returns the run it made.
    `lost_run_requeue_grace_ms`: after Redis lost its dataset, how long runtime instances have
    to restore the runs they hold before the runs that were only queued are queued again.
    `fence_retention_ms`: how long recovery refuses an ExecutionId it gave up before its DAG
    existed (a zombie instance waking later could otherwise still create it).
    """

    host: str = Field(default_factory=_default_host)
    local_instances: int = Field(default=1, ge=0)
    workers_per_instance: int | None = Field(default=None, ge=1)
    max_local_workers_per_execution: int | None = Field(default=None, ge=1)
    max_concurrent_runs_per_instance: int = Field(default=4, ge=1)
    local_queue_capacity: int = Field(default=100, ge=1)
    heartbeat_interval_ms: int = Field(default=2_000, ge=10)
    instance_stale_after_ms: int = Field(default=10_000, ge=100)
    background_pump: bool = True
    pump_batch_size: int = Field(default=50, ge=1)
    pump_idle_interval_ms: int = Field(default=200, ge=1)
    scale_out_enabled: bool = True
    scale_out_watch_interval_ms: int = Field(default=200, ge=1)
    reservation_ttl_ms: int = Field(default=30_000, ge=100)
    claim_lease_ms: int = Field(default=30_000, ge=100)
    default_submit_mode: SubmitMode = SubmitMode.QUEUE_FIRST
    tenants_file: Path | None = None
    recovery_enabled: bool = True
    health_window_ms: int = Field(default=DEFAULT_HEALTH_WINDOW_MS, ge=10)
    health_check_interval_ms: int = Field(default=1_000, ge=1)
    recovery_interval_ms: int = Field(default=1_000, ge=1)
    lifecycle: LifecycleSettings = Field(default_factory=LifecycleSettings)
    idempotency_window_ms: int = Field(default=DEFAULT_IDEMPOTENCY_WINDOW_MS, ge=1)
    lost_run_requeue_grace_ms: int = Field(default=10_000, ge=0)
    fence_retention_ms: int = Field(default=DEFAULT_FENCE_RETENTION_MS, ge=1)

    @property
    def control_plane_id(self) -> str:
        return f"control-plane:{self.host}"

    @classmethod
    def from_env(cls) -> ControlPlaneSettings:
        env = {
            # Names this control plane and its local instances: give each process on one host its own.
            "host": os.environ.get("MCP_RUNTIME_HOST"),
            "tenants_file": os.environ.get("MCP_RUNTIME_TENANTS_FILE"),
            "local_instances": os.environ.get("MCP_RUNTIME_LOCAL_INSTANCES"),
            "workers_per_instance": os.environ.get("MCP_RUNTIME_WORKERS_PER_INSTANCE"),
            "max_local_workers_per_execution": os.environ.get("MCP_RUNTIME_MAX_WORKERS_PER_EXECUTION"),
            "max_concurrent_runs_per_instance": os.environ.get("MCP_RUNTIME_MAX_RUNS_PER_INSTANCE"),
            "background_pump": os.environ.get("MCP_RUNTIME_BACKGROUND_PUMP"),
            "default_submit_mode": os.environ.get("MCP_RUNTIME_SUBMIT_MODE"),
            "idempotency_window_ms": os.environ.get("MCP_RUNTIME_IDEMPOTENCY_WINDOW_MS"),
            "lost_run_requeue_grace_ms": os.environ.get("MCP_RUNTIME_LOST_RUN_REQUEUE_GRACE_MS"),
            # Several hosts: control planes that must not start runtime-instance processes on their
            # own host (instances run on hosts of their own) set MCP_RUNTIME_SCALE_OUT=false.
            "scale_out_enabled": os.environ.get("MCP_RUNTIME_SCALE_OUT"),
            "heartbeat_interval_ms": os.environ.get("MCP_RUNTIME_HEARTBEAT_MS"),
            "health_window_ms": os.environ.get("MCP_RUNTIME_HEALTH_WINDOW_MS"),
            "health_check_interval_ms": os.environ.get("MCP_RUNTIME_HEALTH_CHECK_INTERVAL_MS"),
            "recovery_interval_ms": os.environ.get("MCP_RUNTIME_RECOVERY_INTERVAL_MS"),
            "fence_retention_ms": os.environ.get("MCP_RUNTIME_FENCE_RETENTION_MS"),
        }
        values: dict[str, object] = {key: value for key, value in env.items() if value}
        values["lifecycle"] = LifecycleSettings.from_env()
        return cls.model_validate(values)
