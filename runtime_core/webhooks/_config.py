"""Webhook configuration: per-tenant endpoints and callback hosts, and the delivery settings.

Owns the models of the `webhooks` section of the tenant settings file (camelCase, next to
`tenants`, keyed by tenant id; no `default` fallback: a tenant without an entry gets no
webhooks and accepts no `callback_url`) and of the delivery settings (attempts, back-off,
timeout, lease, retention; environment overrides). Signing secrets are never in the file:
an endpoint names the environment variable holding its secret (`secretEnv`), checked when
the settings are loaded and read when a delivery is signed. Must not deliver anything.

```json
{"tenants": {...},
 "webhooks": {"tenant-a": {
    "endpoints": [{"name": "ops", "url": "https://hooks.example.com/runs",
                   "secretEnv": "TENANT_A_WEBHOOK_SECRET", "events": ["run.completed"]}],
    "callbackHosts": ["hooks.tenant-a.example"], "callbackSecretEnv": "TENANT_A_CALLBACK_SECRET"}}}
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from runtime_core.events import DURABLE_EVENTS, RunEventType

WEBHOOK_EVENTS = sorted(DURABLE_EVENTS)
"""What a webhook can announce: the end of a run (completed, failed, cancelled, rejected)
and a run waiting for human input."""

ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _CamelModel(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, alias_generator=to_camel, extra="forbid")


def _webhook_events(events: list[RunEventType]) -> list[RunEventType]:
    unknown = [event.value for event in events if event not in DURABLE_EVENTS]
    if unknown:
        allowed = ", ".join(event.value for event in WEBHOOK_EVENTS)
        raise ValueError(f"events {unknown} cannot be sent to a webhook; choose among {allowed}")
    return events


class WebhookEndpoint(_CamelModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    url: str = Field(pattern=r"^https?://", max_length=2048)
    secret_env: str = Field(pattern=ENV_NAME_PATTERN)
    events: list[RunEventType] = Field(default_factory=lambda: list(WEBHOOK_EVENTS))

    _events = field_validator("events")(_webhook_events)


class TenantWebhooks(_CamelModel):
    """One tenant's endpoints (every matching event) and per-submit callback policy."""

    endpoints: list[WebhookEndpoint] = Field(default_factory=list)
    callback_hosts: list[str] = Field(default_factory=list)
    callback_secret_env: str | None = Field(default=None, pattern=ENV_NAME_PATTERN)
    callback_events: list[RunEventType] = Field(default_factory=lambda: list(WEBHOOK_EVENTS))

    _events = field_validator("callback_events")(_webhook_events)

    @field_validator("callback_hosts")
    @classmethod
    def _lower_hosts(cls, hosts: list[str]) -> list[str]:
        return [host.strip().lower() for host in hosts if host.strip()]

    @model_validator(mode="after")
    def _callbacks_need_a_secret(self) -> TenantWebhooks:
        if self.callback_hosts and self.callback_secret_env is None:
            raise ValueError(
                "callbackHosts needs callbackSecretEnv (the variable holding the signing secret)"
            )
        names = [endpoint.name for endpoint in self.endpoints]
        if len(set(names)) != len(names) or "callback" in names:
            raise ValueError("endpoint names must be unique within a tenant and not 'callback'")
        return self

    def secret_variables(self) -> list[str]:
        names = [endpoint.secret_env for endpoint in self.endpoints]
        return names + ([self.callback_secret_env] if self.callback_secret_env else [])


class WebhookDeliverySettings(BaseModel):
    """Retries: attempt n+1 waits `min(backoff_max_ms, backoff_base_ms * 2**(n-1))` after
    attempt n fails; after `max_attempts` failures the delivery is dead-lettered."""

    model_config = ConfigDict(frozen=True)

    max_attempts: int = Field(default=8, ge=1, le=100)
    backoff_base_ms: int = Field(default=1_000, ge=1)
    backoff_max_ms: int = Field(default=600_000, ge=1)
    timeout_ms: int = Field(default=10_000, ge=1)
    claim_lease_ms: int = Field(default=60_000, ge=10)
    batch_size: int = Field(default=32, ge=1, le=1_000)
    idle_interval_ms: int = Field(default=500, ge=1)
    delivered_retention_ms: int = Field(default=7 * 24 * 3_600_000, ge=1)
    dead_retention_ms: int = Field(default=30 * 24 * 3_600_000, ge=1)

    @model_validator(mode="after")
    def _lease_outlives_a_request(self) -> WebhookDeliverySettings:
        if self.claim_lease_ms <= self.timeout_ms:
            raise ValueError("claim_lease_ms must be longer than timeout_ms (a claim outlives its request)")
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WebhookDeliverySettings:
        env = os.environ if environ is None else environ
        names = {
            "max_attempts": "MCP_RUNTIME_WEBHOOK_MAX_ATTEMPTS",
            "backoff_base_ms": "MCP_RUNTIME_WEBHOOK_BACKOFF_MS",
            "backoff_max_ms": "MCP_RUNTIME_WEBHOOK_BACKOFF_MAX_MS",
            "timeout_ms": "MCP_RUNTIME_WEBHOOK_TIMEOUT_MS",
        }
        return cls.model_validate({field: env[name] for field, name in names.items() if env.get(name)})


class WebhookSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenants: dict[str, TenantWebhooks] = Field(default_factory=dict)
    delivery: WebhookDeliverySettings = Field(default_factory=WebhookDeliverySettings)

    @property
    def enabled(self) -> bool:
        return any(t.endpoints or t.callback_hosts for t in self.tenants.values())

    def tenant(self, tenant_id: str) -> TenantWebhooks:
        return self.tenants.get(tenant_id) or TenantWebhooks()

    def secret_variables(self) -> list[str]:
        """Every signing-secret variable a tenant names."""
        return sorted({name for t in self.tenants.values() for name in t.secret_variables()})

    def missing_secrets(self, environ: Mapping[str, str] | None = None) -> list[str]:
        env = os.environ if environ is None else environ
        return [name for name in self.secret_variables() if not env.get(name)]
