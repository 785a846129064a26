"""The Prometheus exposition: one process's metrics as text on `GET /metrics`.

Owns `MetricsExposition` (one registry: the runtime's counters and histograms, the MCP
operation histogram, and the scrape-time gauge collectors it refreshes before rendering;
without `_created` series),
the starlette endpoint and app serving it (Prometheus text format 0.0.4 unless the scraper
negotiates OpenMetrics), the registry metadata key naming a process's metrics URL, and
`sd_target_groups`, the body of a Prometheus HTTP service-discovery answer listing such
URLs. Must not authenticate (a caller may wrap the endpoint in its own check) or decide what is
measured.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from runtime_core.observability._gauges import CachedGauges

METRICS_PATH = "/metrics"
# Prometheus HTTP service discovery of every runtime-instance process's metrics endpoint.
SD_PATH = "/metrics/targets"
# Registry metadata of an instance: the URL Prometheus scrapes for its process.
METRICS_ENDPOINT_KEY = "metrics.endpoint"

# No `<counter>_created` / `<histogram>_created` series: one more series per label set that
# dashboards and alerts never use (process-wide: every registry rendered here).
disable_created_metrics()


class MetricsExposition:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._gauges: list[CachedGauges] = []

    def add_gauges(self, *collectors: CachedGauges) -> None:
        """Register scrape-time gauges (refreshed before each render)."""
        for collector in collectors:
            self.registry.register(collector)
            self._gauges.append(collector)

    def remove_gauges(self, *collectors: CachedGauges) -> None:
        for collector in collectors:
            if collector in self._gauges:
                self._gauges.remove(collector)
                self.registry.unregister(collector)

    async def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition and its content type, negotiated from an `Accept` header: Prometheus
        text 0.0.4 by default, OpenMetrics or text 1.0.0 when the scraper asks for them."""
        await asyncio.gather(*(gauges.refresh() for gauges in self._gauges))
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type


Endpoint = Callable[[Request], Awaitable[Response]]


def metrics_endpoint(exposition: MetricsExposition) -> Endpoint:
    async def metrics(request: Request) -> Response:
        body, content_type = await exposition.render(request.headers.get("accept", ""))
        return Response(body, headers={"content-type": content_type})

    return metrics


def metrics_route(exposition: MetricsExposition, wrap: Callable[[Endpoint], Endpoint] | None = None) -> Route:
    """`GET /metrics`; `wrap` puts a check in front of it (the control plane's metrics token)."""
    endpoint = metrics_endpoint(exposition)
    return Route(METRICS_PATH, wrap(endpoint) if wrap else endpoint, methods=["GET"])


def metrics_app(
    exposition: MetricsExposition, wrap: Callable[[Endpoint], Endpoint] | None = None
) -> Starlette:
    """A starlette app answering only `GET /metrics` (for a dedicated metrics address)."""
    return Starlette(routes=[metrics_route(exposition, wrap)])


def sd_target_groups(endpoints: Mapping[str, Mapping[str, str]]) -> list[dict[str, object]]:
    """Prometheus HTTP service-discovery groups, one per metrics URL (-> its extra labels):
    `{"targets": ["host:port"], "labels": {"__scheme__", "__metrics_path__", ...}}`."""
    groups: list[dict[str, object]] = []
    for url, labels in sorted(endpoints.items()):
        parts = urlsplit(url)
        if not parts.netloc:
            continue
        meta = {"__scheme__": parts.scheme or "http", "__metrics_path__": parts.path or METRICS_PATH}
        groups.append({"targets": [parts.netloc], "labels": {**meta, **labels}})
    return groups
