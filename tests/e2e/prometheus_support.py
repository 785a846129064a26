"""A real Prometheus server (Debian's `prometheus`) for tests, and `promtool check metrics`.

`prometheus_server(...)` writes a scrape config for the given targets, starts Prometheus on a
free loopback port with a temporary TSDB, waits for `/-/ready` and always stops it;
`PrometheusServer.query` asks the HTTP query API (`/api/v1/query`) for an instant vector.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core.hot_state import find_free_port
from tests.e2e.mcp_support import child_process

SCRAPE_INTERVAL = "1s"


def require_prometheus() -> tuple[str, str]:
    """Paths of `prometheus` and `promtool`; skip (scripts/test.sh installs them) when absent."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus is None or promtool is None:
        pytest.skip("Debian's prometheus package is not installed (scripts/test.sh installs it)")
    return prometheus, promtool


def promtool_check_metrics(exposition: bytes) -> subprocess.CompletedProcess[str]:
    """`promtool check metrics` over an exposition (exit 0 and no output when it is clean)."""
    _, promtool = require_prometheus()
    return subprocess.run(
        [promtool, "check", "metrics"],
        input=exposition.decode("utf-8"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@dataclass(frozen=True)
class PrometheusServer:
    url: str

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector `promql` evaluates to now (`[{"metric": {...}, "value": [t, "v"]}]`)."""
        reply = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
        reply.raise_for_status()
        body = reply.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def values(self, promql: str) -> dict[str, float]:
        """`promql`'s samples keyed by their labels as sorted JSON (for readable asserts)."""
        return {
            json.dumps(sample["metric"], sort_keys=True): float(sample["value"][1])
            for sample in self.query(promql)
        }

    def wait_for(self, promql: str, accept: Any, *, timeout_s: float = 60.0) -> dict[str, float]:
        """Poll `promql` until `accept(values)` holds (scrapes happen every SCRAPE_INTERVAL)."""
        deadline = time.monotonic() + timeout_s
        while True:
            values = self.values(promql)
            if accept(values):
                return values
            if time.monotonic() > deadline:
                raise AssertionError(f"{promql} never satisfied the condition; last answer {values}")
            time.sleep(0.25)  # waiting on the next scrape of another process: no event to wait on


def _scrape_config(targets: Mapping[str, str], discovered: Mapping[str, str]) -> str:
    timing = {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL}
    jobs = [{"job_name": job, **timing, "static_configs": [{"targets": [t]}]} for job, t in targets.items()]
    jobs += [
        {"job_name": job, **timing, "http_sd_configs": [{"url": url, "refresh_interval": SCRAPE_INTERVAL}]}
        for job, url in discovered.items()
    ]
    # JSON is YAML: no YAML library needed to write the config.
    return json.dumps({"global": {"scrape_interval": SCRAPE_INTERVAL}, "scrape_configs": jobs})


@contextmanager
def prometheus_server(
    directory: Path, targets: Mapping[str, str], discovered: Mapping[str, str] | None = None
) -> Iterator[PrometheusServer]:
    """Prometheus scraping every second: `targets` (job name -> `host:port`, path /metrics) and
    the targets of `discovered` (job name -> HTTP service-discovery URL)."""
    prometheus, _ = require_prometheus()
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "prometheus.yml"
    config.write_text(_scrape_config(targets, discovered or {}), encoding="utf-8")
    port = find_free_port()
    command = [
        prometheus,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with child_process(command, env={}, log=directory / "prometheus.log") as process:
        server = PrometheusServer(f"http://127.0.0.1:{port}")
        _wait_ready(process, server, directory / "prometheus.log")
        yield server


def _wait_ready(process: subprocess.Popen[bytes], server: PrometheusServer, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{server.url}/-/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"prometheus did not become ready:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)  # polling another process's readiness: there is no event to wait on
