"""ObservabilitySettings: what the metrics exposition may show and how fresh its gauges are.

Owns the operator's choices, read from the environment: tenant labels on metrics (off by
default: tenant ids are business data, and a label per tenant multiplies series) and how long
scrape-time gauges are cached. Tracing is configured by the standard OTEL_* variables
instead (see `_tracing`). Must not start anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.observability._gauges import DEFAULT_GAUGE_TTL_S

TENANT_LABELS_VARIABLE = "MCP_RUNTIME_METRICS_TENANT_LABELS"
CACHE_SECONDS_VARIABLE = "MCP_RUNTIME_METRICS_CACHE_SECONDS"


class ObservabilitySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    metrics_tenant_labels: bool = False
    metrics_cache_s: float = Field(default=DEFAULT_GAUGE_TTL_S, ge=0, le=300)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ObservabilitySettings:
        values = {
            "metrics_tenant_labels": env.get(TENANT_LABELS_VARIABLE),
            "metrics_cache_s": env.get(CACHE_SECONDS_VARIABLE),
        }
        return cls.model_validate({key: value for key, value in values.items() if value})
