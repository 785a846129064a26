"""WebhookDeliverer: one pass over the due deliveries of the outbox, over HTTP.

Owns an attempt: claim the delivery (lease + attempt count, `webhook_claim`), POST its exact
body with the event id, attempt number and a fresh HMAC-SHA256 signature header (the secret
read from its environment variable at that moment), then settle it (`webhook_settle`): any
2xx answer is Delivered; another status, a timeout or a connection error is a failed
attempt, retried after the back-off or dead-lettered after the last one. Attempts of one
pass run concurrently, each bounded by the HTTP timeout. Logs name the delivery, event,
tenant, target and host: never a secret, a signature or a URL's path and query. Must not
decide targets.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from runtime_core.webhooks._config import WebhookDeliverySettings
from runtime_core.webhooks._outbox import ClaimedDelivery, DeliveryStatus, WebhookOutbox
from runtime_core.webhooks._signing import SIGNATURE_HEADER, signature_header

log = logging.getLogger("runtime_core.webhooks")

EVENT_ID_HEADER = "MCP-Runtime-Event-Id"
EVENT_TYPE_HEADER = "MCP-Runtime-Event-Type"
ATTEMPT_HEADER = "MCP-Runtime-Delivery-Attempt"
USER_AGENT = "mcp-runtime-webhooks/0.1"
_OUTCOMES = {
    DeliveryStatus.DELIVERED: "delivered",
    DeliveryStatus.RETRYING: "retrying",
    DeliveryStatus.DEAD: "dead_lettered",
}


class DeliveryMetrics(Protocol):
    """Where settled attempts are counted (`RuntimeMetrics.webhook_settled`)."""

    def webhook_settled(self, outcome: str) -> None: ...


class WebhookDeliverer:
    def __init__(
        self,
        outbox: WebhookOutbox,
        settings: WebhookDeliverySettings,
        client: httpx.AsyncClient,
        metrics: DeliveryMetrics | None = None,
    ) -> None:
        self.outbox = outbox
        self.settings = settings
        self.client = client
        self.metrics = metrics

    async def deliver_due(self) -> int:
        """Attempt every delivery due now (up to `batch_size`); how many were attempted."""
        claimed = []
        for delivery_id in await self.outbox.due_ids(self.settings.batch_size):
            delivery = await self.outbox.claim(delivery_id, secrets.token_hex(12))
            if delivery is not None:
                claimed.append(delivery)
        await asyncio.gather(*(self._attempt(delivery) for delivery in claimed))
        return len(claimed)

    async def _attempt(self, delivery: ClaimedDelivery) -> None:
        http_status, error = await self._post(delivery)
        delivered = http_status is not None and 200 <= http_status < 300
        outcome = await self.outbox.settle(
            delivery, delivered=delivered, http_status=http_status, error=error
        )
        if not outcome.settled:
            log.warning("webhook.lease_lost", extra=self._fields(delivery))
            return
        settled = _OUTCOMES[outcome.status or DeliveryStatus.RETRYING]
        if self.metrics is not None:
            self.metrics.webhook_settled(settled)
        event = f"webhook.{settled}"
        level = logging.WARNING if outcome.status is DeliveryStatus.DEAD else logging.INFO
        log.log(level, event, extra={**self._fields(delivery), "http_status": http_status, "error": error})

    async def _post(self, delivery: ClaimedDelivery) -> tuple[int | None, str]:
        secret = os.environ.get(delivery.secret_env)
        if not secret:
            return None, f"signing secret variable {delivery.secret_env} is not set"
        body = delivery.body.encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            EVENT_ID_HEADER: delivery.event_id,
            EVENT_TYPE_HEADER: delivery.event_type,
            ATTEMPT_HEADER: str(delivery.attempt),
            SIGNATURE_HEADER: signature_header(secret, body, int(time.time())),
        }
        try:
            response = await self.client.post(
                delivery.url, content=body, headers=headers, timeout=self.settings.timeout_ms / 1000
            )
        except httpx.TimeoutException:
            return None, f"no answer within {self.settings.timeout_ms} ms"
        except httpx.HTTPError as exc:  # the message may quote the URL: keep only the kind
            return None, f"request failed ({type(exc).__name__})"
        return response.status_code, "" if response.is_success else f"HTTP {response.status_code}"

    @staticmethod
    def _fields(delivery: ClaimedDelivery) -> dict[str, object]:
        return {
            "delivery_id": delivery.delivery_id,
            "event_id": delivery.event_id,
            "tenant_id": delivery.tenant_id,
            "target": delivery.target,
            "host": urlsplit(delivery.url).hostname,
            "attempt": delivery.attempt,
        }
