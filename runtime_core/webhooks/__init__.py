"""Webhooks: signed run events delivered at least once from a durable outbox in Redis.

Owns the webhook configuration (per-tenant endpoints and allow-listed callback hosts in the
tenant settings file, secrets named by environment variable), the per-submit callback check,
the fan-out from the durable run-event stream (`runtime_core.events`) to one delivery per
event and target, the outbox (`lua/webhook_enqueue.lua`, `webhook_claim.lua`,
`webhook_settle.lua`), delivery over HTTP with an HMAC-SHA256 timestamped signature,
exponential back-off and dead-letter records, and the service running both loops in the
background so no run ever waits for a receiver. Must not know MCP nor change run state.
"""

from runtime_core.webhooks._config import (
    WEBHOOK_EVENTS,
    TenantWebhooks,
    WebhookDeliverySettings,
    WebhookEndpoint,
    WebhookSettings,
)
from runtime_core.webhooks._delivery import (
    ATTEMPT_HEADER,
    EVENT_ID_HEADER,
    EVENT_TYPE_HEADER,
    WebhookDeliverer,
)
from runtime_core.webhooks._fanout import CONSUMER_GROUP, WebhookFanout, webhook_body
from runtime_core.webhooks._outbox import (
    ClaimedDelivery,
    DeliveryStatus,
    WebhookDelivery,
    WebhookOutbox,
    delivery_id,
)
from runtime_core.webhooks._service import WebhookConfigError, WebhookService
from runtime_core.webhooks._signing import (
    DEFAULT_TOLERANCE_S,
    SIGNATURE_HEADER,
    signature_header,
    verify_signature,
)
from runtime_core.webhooks._targets import (
    CALLBACK_TARGET,
    MAX_CALLBACK_URL_LENGTH,
    CallbackNotAllowedError,
    WebhookTarget,
    check_callback,
    event_targets,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Service
    "WebhookService",
    "WebhookConfigError",
    # Configuration and targets
    "WebhookSettings",
    "WebhookDeliverySettings",
    "TenantWebhooks",
    "WebhookEndpoint",
    "WEBHOOK_EVENTS",
    "WebhookTarget",
    "CALLBACK_TARGET",
    "MAX_CALLBACK_URL_LENGTH",
    "check_callback",
    "event_targets",
    "CallbackNotAllowedError",
    # Outbox
    "WebhookOutbox",
    "WebhookDelivery",
    "ClaimedDelivery",
    "DeliveryStatus",
    "delivery_id",
    # Fan-out and delivery
    "WebhookFanout",
    "WebhookDeliverer",
    "webhook_body",
    "CONSUMER_GROUP",
    # Signing and headers
    "signature_header",
    "verify_signature",
    "SIGNATURE_HEADER",
    "DEFAULT_TOLERANCE_S",
    "EVENT_ID_HEADER",
    "EVENT_TYPE_HEADER",
    "ATTEMPT_HEADER",
]
