"""Where a run event goes: the tenant's endpoints and the run's allow-listed callback URL.

Owns the per-submit callback check (`check_callback`: an http(s) URL without credentials
whose host, or host:port, is in the tenant's `callbackHosts`; anything else is a typed
error at submit, quoting only the host, never the URL, which may carry a token) and the
resolution of an event to its delivery targets. Must not deliver.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from runtime_core.errors import RuntimeCoreError
from runtime_core.events import RunEvent
from runtime_core.webhooks._config import WebhookSettings

CALLBACK_TARGET = "callback"
MAX_CALLBACK_URL_LENGTH = 2048


class CallbackNotAllowedError(RuntimeCoreError):
    """A submit's `callback_url` is not an allow-listed http(s) URL of the caller's tenant."""

    code = "callback_not_allowed"


@dataclass(frozen=True)
class WebhookTarget:
    """One destination of an event: a configured endpoint by name, or `callback`."""

    name: str
    url: str
    secret_env: str


def check_callback(settings: WebhookSettings, tenant_id: str, url: str) -> None:
    """Raise CallbackNotAllowedError unless `url` may receive this tenant's run events."""
    parts = urlsplit(url) if len(url) <= MAX_CALLBACK_URL_LENGTH else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackNotAllowedError(
            f"callback_url must be an absolute http(s) URL of at most {MAX_CALLBACK_URL_LENGTH} characters.",
            hint="Pass e.g. https://hooks.example.com/runs, or leave callback_url out.",
        )
    if parts.username or parts.password:
        raise CallbackNotAllowedError(
            "callback_url must not carry credentials (user:password@).",
            hint="Verify deliveries with the signature header instead (docs/mcp.md, Webhooks).",
        )
    host = parts.hostname.lower()
    allowed = settings.tenant(tenant_id).callback_hosts
    if host not in allowed and f"{host}:{parts.port}" not in allowed:
        raise CallbackNotAllowedError(
            f"callback_url host '{host}' is not allow-listed for tenant '{tenant_id}'; nothing submitted.",
            hint="Use a host listed in the tenant's webhooks.callbackHosts (tenant settings file), "
            "ask an administrator to add it, or leave callback_url out.",
        )


def event_targets(
    settings: WebhookSettings, event: RunEvent, callback_url: str | None
) -> list[WebhookTarget]:
    """The endpoints of the event's tenant subscribed to its type, plus the run's callback."""
    tenant = settings.tenant(event.tenant_id)
    targets = [
        WebhookTarget(endpoint.name, endpoint.url, endpoint.secret_env)
        for endpoint in tenant.endpoints
        if event.type in endpoint.events
    ]
    if callback_url and tenant.callback_secret_env and event.type in tenant.callback_events:
        targets.append(WebhookTarget(CALLBACK_TARGET, callback_url, tenant.callback_secret_env))
    return targets
