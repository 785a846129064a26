"""Scrape-time gauges: values read by async readers (Redis, the registry) and cached briefly.

Owns `GaugeFamily` (a gauge's name, help, label names and its async reader) and
`CachedGauges`, a prometheus_client collector that serves the last values read: `refresh()`
(awaited by the exposition before rendering) re-reads every family at most once per `ttl_s`,
one refresh at a time however many scrapes arrive together, so scraping stays cheap. A reader
that fails keeps its family out of that scrape (logged) instead of failing the scrape. Must not
write anything.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger("runtime_core.observability")

DEFAULT_GAUGE_TTL_S = 2.0

# label values (in `label_names` order) -> value
GaugeValues = Mapping[tuple[str, ...], float]
GaugeReader = Callable[[], Awaitable[GaugeValues]]


@dataclass(frozen=True)
class GaugeFamily:
    name: str
    documentation: str
    label_names: tuple[str, ...]
    read: GaugeReader


class CachedGauges(Collector):
    def __init__(self, families: Iterable[GaugeFamily], *, ttl_s: float = DEFAULT_GAUGE_TTL_S) -> None:
        self.families = list(families)
        self.ttl_s = ttl_s
        self._values: dict[str, GaugeValues] = {}
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        """Re-read every family unless the cached values are younger than `ttl_s`."""
        async with self._lock:
            if self._read_at is not None and time.monotonic() - self._read_at < self.ttl_s:
                return
            results = await asyncio.gather(*(f.read() for f in self.families), return_exceptions=True)
            self._values = {}
            for family, result in zip(self.families, results, strict=True):
                if isinstance(result, BaseException):
                    failure = {"gauge": family.name, "error": repr(result)}
                    log.warning("metrics.gauge_read_failed", extra=failure)
                else:
                    self._values[family.name] = result
            self._read_at = time.monotonic()

    def describe(self) -> Iterator[GaugeMetricFamily]:
        for family in self.families:
            yield GaugeMetricFamily(family.name, family.documentation, labels=family.label_names)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for family in self.families:
            values = self._values.get(family.name)
            if values is None:
                continue
            metric = GaugeMetricFamily(family.name, family.documentation, labels=family.label_names)
            for labels, value in sorted(values.items()):
                metric.add_metric(list(labels), value)
            yield metric
