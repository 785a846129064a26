"""HealthService: liveness, and readiness as every check run concurrently under a deadline."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from runtime_core.errors import RuntimeCoreError
from runtime_core.health._checks import HealthCheck
from runtime_core.health._models import CheckResult, HealthReport, HealthStatus

log = logging.getLogger("runtime_core.health")

DEFAULT_CHECK_TIMEOUT_S = 2.0


class HealthService:
    def __init__(self, checks: Mapping[str, HealthCheck], *, timeout_s: float = DEFAULT_CHECK_TIMEOUT_S):
        self.checks = dict(checks)
        self.timeout_s = timeout_s

    def live(self) -> HealthReport:
        """The process answers (its event loop runs this): nothing else is checked."""
        return HealthReport(
            status=HealthStatus.ALIVE,
            checks={"process": CheckResult(ok=True, detail="event loop answering", duration_ms=0.0)},
        )

    async def ready(self) -> HealthReport:
        names = list(self.checks)
        results = await asyncio.gather(*(self._run(name) for name in names))
        checks = dict(zip(names, results, strict=True))
        ready = all(result.ok for result in results)
        if not ready:
            failed = sorted(name for name, result in checks.items() if not result.ok)
            log.warning("health.not_ready failed_checks=%s", ",".join(failed))
        return HealthReport(status=HealthStatus.READY if ready else HealthStatus.NOT_READY, checks=checks)

    async def _run(self, name: str) -> CheckResult:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                detail = await self.checks[name]()
            ok = True
        except TimeoutError:
            ok, detail = False, f"no answer within {self.timeout_s:g} s"
        except RuntimeCoreError as exc:
            ok, detail = False, f"[{exc.code}] {exc.message}"
        except Exception as exc:  # any failure of a check is its answer: not ready
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        return CheckResult(ok=ok, detail=detail, duration_ms=round((time.perf_counter() - started) * 1000, 2))
