"""Health of a runtime process: liveness, readiness and the checks behind them.

Owns the readiness checks (Redis answers a PING, the durable store accepts a write, the data
directory accepts a write, the background loops are alive), running them concurrently with
a deadline each, the report naming every check, and the start-up check that refuses an
unwritable data directory with a typed error naming it. Liveness is only "the process
answers". Must not decide what a process runs, and must not put secrets (URLs with
passwords, tokens) in a report: reports are served without authentication. Also the client side:
probing running processes until they are ready (`mcp-runtime wait-ready`).
"""

from runtime_core.health._checks import (
    HealthCheck,
    LoopStates,
    background_loops_alive,
    data_dir_accepts_a_write,
    durable_store_accepts_a_write,
    redis_answers,
)
from runtime_core.health._data_dir import DataDirectoryError, check_data_dir_writable
from runtime_core.health._models import CheckResult, HealthReport, HealthStatus
from runtime_core.health._probe import ProbeTarget, wait_ready
from runtime_core.health._service import DEFAULT_CHECK_TIMEOUT_S, HealthService

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Service and reports
    "HealthService",
    "HealthReport",
    "HealthStatus",
    "CheckResult",
    "DEFAULT_CHECK_TIMEOUT_S",
    # Checks
    "HealthCheck",
    "LoopStates",
    "redis_answers",
    "durable_store_accepts_a_write",
    "data_dir_accepts_a_write",
    "background_loops_alive",
    # Start-up
    "check_data_dir_writable",
    "DataDirectoryError",
    # Probing a running process from outside
    "ProbeTarget",
    "wait_ready",
]
