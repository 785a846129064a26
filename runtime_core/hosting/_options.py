"""Options of a runtime-instance process: one typed model and the argument parser that fills it.

Owns `RuntimeInstanceProcessOptions` (transport, port, tenant scope, pool size, sizing,
Redis, data directory, host id, step plug-ins, timeouts, metrics port and the registry
metadata naming the process's metrics endpoint) and `build_arg_parser()`, shared by
`python -m runtime_core.hosting` and the `mcp-runtime runtime-instance` command. Must not
start anything.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from runtime_core.assistance import AssistanceSettings
from runtime_core.bootstrap import default_data_dir
from runtime_core.control_plane import TenantsFile
from runtime_core.instances import (
    HostTransport,
    IsolationMode,
    RuntimeInstanceSettings,
    TenantRuntimeSettings,
    TenantSettingsCatalog,
    hosted_instance_ids,
)
from runtime_core.observability import METRICS_ENDPOINT_KEY
from runtime_core.plugins import StepPluginSettings, split_references

CONTROL_PLANE_ID_KEY = "control.plane.id"
TENANTS_FILE_ENV = "MCP_RUNTIME_TENANTS_FILE"
REDIS_URL_ENV = "REDIS_URL"
REDIS_PREFIX_ENV = "MCP_RUNTIME_REDIS_PREFIX"
HOST_ID_KEY = "runtime.host.id"


class RuntimeInstanceProcessOptions(BaseModel):
    """Unset sizing / isolation fields come from the tenant's settings (tenants file or default)."""

    transport: HostTransport
    port: int = Field(ge=1, le=65_535)
    bind_host: str = "127.0.0.1"
    tenant: str
    tenant_group: str | None = None
    isolation: IsolationMode | None = None
    instance_prefix: str | None = None
    pool_size: int = Field(default=1, ge=1)
    workers: int | None = Field(default=None, ge=1)
    max_local_workers_per_execution: int | None = Field(default=None, ge=1)
    max_concurrent_runs: int | None = Field(default=None, ge=1)
    local_queue_capacity: int | None = Field(default=None, ge=1)
    redis_url: str
    redis_prefix: str = "mcprt:"
    data_dir: Path = Field(default_factory=default_data_dir)
    host_id: str
    tenants_file: Path | None = None
    steps: tuple[str, ...] = ()
    step_entry_points: bool = True
    providers_file: Path | None = None
    heartbeat_ms: int = Field(default=2_000, ge=10)
    discovery_timeout_s: float = Field(default=10.0, gt=0)
    parent_pid: int | None = None
    metrics_port: int | None = Field(default=None, ge=1, le=65_535)
    assistance: bool = True

    @property
    def metrics_endpoint(self) -> str | None:
        """Where `/metrics` is served: the dedicated port, else the HTTP command endpoint."""
        if self.metrics_port is not None:
            return f"http://{self.bind_host}:{self.metrics_port}/metrics"
        if self.transport is HostTransport.HTTP:
            return f"{self.endpoint}/metrics"
        return None

    @property
    def endpoint(self) -> str:
        """The `transport.endpoint` published in the registry."""
        if self.transport is HostTransport.HTTP:
            return f"http://{self.bind_host}:{self.port}"
        return f"{self.bind_host}:{self.port}"

    def step_plugins(self) -> StepPluginSettings:
        """The environment's plug-in settings plus `--steps`; `--no-step-entry-points` wins."""
        from_env = StepPluginSettings.from_env().with_references(self.steps)
        return from_env.model_copy(update={"entry_points": from_env.entry_points and self.step_entry_points})

    def tenant_catalog(self) -> TenantSettingsCatalog:
        return TenantsFile.read(self.tenants_file).catalog

    def tenant_settings(self) -> TenantRuntimeSettings:
        return self.tenant_catalog().resolve(self.tenant)

    def instance_settings(self, control_plane_id: str) -> list[RuntimeInstanceSettings]:
        """The K child instances: ids `rt_<host id>:<prefix>-<n>`, owned by the tenant unless Shared."""
        tenant = self.tenant_settings()
        isolation = self.isolation or tenant.isolation_mode
        prefix = self.instance_prefix or tenant.runtime_instance_id_prefix
        workers = self.workers or tenant.worker_count_per_instance
        owned = isolation is not IsolationMode.SHARED
        return [
            RuntimeInstanceSettings(
                runtime_instance_id=runtime_instance_id,
                host=self.host_id,
                worker_count=workers,
                max_local_workers_per_execution=(
                    self.max_local_workers_per_execution or tenant.max_local_workers_per_execution or workers
                ),
                max_concurrent_runs=self.max_concurrent_runs or tenant.max_concurrent_runs_per_instance,
                local_queue_capacity=self.local_queue_capacity or tenant.local_queue_capacity,
                isolation_mode=isolation,
                tenant_id=self.tenant if owned else None,
                tenant_group_id=self.tenant_group if owned else None,
                prefer_dedicated_capacity=tenant.prefer_dedicated_capacity,
                allow_shared_fallback=tenant.allow_shared_fallback,
                runtime_instance_id_prefix=prefix,
                heartbeat_interval_ms=self.heartbeat_ms,
                provider_name=self.transport.value,
                transport_name=self.transport.value,
                transport_endpoint=self.endpoint,
                metadata=self._registry_metadata(control_plane_id),
                assistance=AssistanceSettings(enabled=self.assistance),
            )
            for runtime_instance_id in hosted_instance_ids(self.host_id, prefix, self.pool_size)
        ]

    def _registry_metadata(self, control_plane_id: str) -> dict[str, str]:
        metadata = {CONTROL_PLANE_ID_KEY: control_plane_id, HOST_ID_KEY: self.host_id}
        if self.metrics_endpoint is not None:
            metadata[METRICS_ENDPOINT_KEY] = self.metrics_endpoint
        return metadata


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a bad value is a usage error, exit 2, no traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def port_number(text: str) -> int:
    """argparse type: a TCP port, 1-65535."""
    value = positive_int(text)
    if value > 65_535:
        raise argparse.ArgumentTypeError(f"a port is at most 65535, got {value}")
    return value


def add_process_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the runtime-instance options to `parser` (a top-level parser or a CLI subcommand)."""
    transports = [t.value for t in HostTransport]
    parser.add_argument(
        "--transport", required=True, choices=transports, help="command endpoint protocol: http or grpc"
    )
    parser.add_argument("--port", required=True, type=port_number, help="port of the command endpoint")
    parser.add_argument(
        "--bind-host", default="127.0.0.1", help="address the endpoint listens on (default 127.0.0.1)"
    )
    parser.add_argument("--tenant", required=True, help="tenant id whose scope the instances serve")
    parser.add_argument("--tenant-group", help="tenant group id of the instances (default: none)")
    parser.add_argument(
        "--isolation",
        choices=[m.value for m in IsolationMode],
        help="Shared / Dedicated / Hybrid (default: the tenant's isolation mode)",
    )
    parser.add_argument("--instance-prefix", help="RuntimeInstanceIdPrefix (default: the tenant's)")
    parser.add_argument(
        "--pool-size", type=positive_int, default=1, help="child runtime instances (K, default 1)"
    )
    parser.add_argument(
        "--workers", type=positive_int, help="workers per child instance (W, default: the tenant's)"
    )
    parser.add_argument(
        "--max-local-workers-per-execution",
        type=positive_int,
        help="workers one execution may use on an instance (default: the tenant's, else W)",
    )
    parser.add_argument(
        "--max-concurrent-runs",
        type=positive_int,
        help="runs one instance executes at once (default: the tenant's)",
    )
    parser.add_argument(
        "--local-queue-capacity", type=positive_int, help="runs an instance may queue (default: tenant's)"
    )
    from_env = os.environ.get(REDIS_URL_ENV) or None  # like `serve`: keeps a password off the command line
    parser.add_argument(
        "--redis-url",
        default=from_env,
        required=from_env is None,
        help=f"Redis shared with the control plane (default: ${REDIS_URL_ENV})",
    )
    parser.add_argument(
        "--redis-prefix",
        default=os.environ.get(REDIS_PREFIX_ENV) or "mcprt:",
        help=f"key prefix shared with the control plane (default: ${REDIS_PREFIX_ENV}, else mcprt:)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="data directory (SQLite durable store, retrieval seed); default: the per-user directory",
    )
    parser.add_argument("--host-id", required=True, help="this process's host id (part of instance ids)")
    parser.add_argument(
        "--tenants-file",
        type=Path,
        default=os.environ.get(TENANTS_FILE_ENV) or None,  # like `serve`: the variable, when set
        help=f"tenant settings JSON (default: ${TENANTS_FILE_ENV}, else built-in defaults)",
    )
    parser.add_argument(
        "--steps",
        action="append",
        type=lambda value: split_references([value]),
        help="step plug-in `module:attr` references (repeat or comma-separate); entry points load too",
    )
    parser.add_argument(
        "--no-step-entry-points",
        dest="step_entry_points",
        action="store_false",
        help="do not load step plug-ins from installed entry points (group mcp_runtime.steps)",
    )
    parser.add_argument(
        "--providers-file",
        type=Path,
        help="LLM / retrieval providers JSON (default: $MCP_RUNTIME_PROVIDERS_FILE)",
    )
    parser.add_argument(
        "--heartbeat-ms", type=positive_int, default=2_000, help="registry heartbeat interval (default 2000)"
    )
    parser.add_argument(
        "--discovery-timeout",
        dest="discovery_timeout_s",
        type=float,
        default=10.0,
        help="seconds to wait for the control plane's discovery record (default 10)",
    )
    parser.add_argument(
        "--parent-pid", type=positive_int, help="exit cleanly when this parent process is gone"
    )
    parser.add_argument(
        "--metrics-port",
        type=positive_int,
        help="serve Prometheus /metrics on this port (HTTP transport: also on the command port)",
    )
    parser.add_argument(
        "--no-assistance",
        dest="assistance",
        action="store_false",
        help="never lend idle workers to other instances' wide runs, nor ask them for help "
        "(execution assistance is on by default)",
    )


def build_arg_parser(prog: str = "python -m runtime_core.hosting") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run a runtime-instance process: K child runtime instances behind an HTTP or gRPC "
        "command endpoint, registered with the control plane found through Redis discovery.",
    )
    add_process_arguments(parser)
    return parser


def options_from_args(args: argparse.Namespace) -> RuntimeInstanceProcessOptions:
    """The options model from parsed arguments (extra attributes of a CLI namespace are ignored)."""
    fields = RuntimeInstanceProcessOptions.model_fields
    values = {key: value for key, value in vars(args).items() if key in fields and value is not None}
    values["steps"] = [reference for group in values.get("steps", []) for reference in group]
    return RuntimeInstanceProcessOptions.model_validate(values)


def parse_options(argv: Sequence[str] | None = None) -> RuntimeInstanceProcessOptions:
    return options_from_args(build_arg_parser().parse_args(argv))
