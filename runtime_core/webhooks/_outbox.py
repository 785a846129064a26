"""WebhookOutbox: the durable outbox of webhook deliveries in Redis, and its Lua wrappers.

Key layout (prefix `mcprt:` by default), every key under the hash tag `{webhooks}`:
- `{webhooks}:delivery:<id>`  HASH  one delivery (one event to one target): event id and
                                    type, tenant, target name, URL, the name of the secret's
                                    environment variable, the exact body, status (Pending,
                                    Retrying, Delivered, Dead), attempts and their log; kept
                                    for the delivered / dead retention once settled;
- `{webhooks}:due`            ZSET  delivery id -> when it may be attempted (a claimed
                                    delivery is re-due when its lease runs out);
- `{webhooks}:dead`           ZSET  dead-letter records by the time they died;
- `{webhooks}:event:<event>`  SET   the deliveries of one event.
`webhook_enqueue`, `webhook_claim` and `webhook_settle` are the only writers of these keys
(this module is the only place that knows their KEYS/ARGV). Must not send HTTP.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from runtime_core.hot_state import HotState
from runtime_core.webhooks._config import WebhookDeliverySettings
from runtime_core.webhooks._targets import WebhookTarget

WEBHOOKS_TAG = "webhooks"
DELIVERY_ID_PREFIX = "whd_"


class DeliveryStatus(StrEnum):
    PENDING = "Pending"
    RETRYING = "Retrying"
    DELIVERED = "Delivered"
    DEAD = "Dead"


class WebhookDelivery(BaseModel):
    """A delivery as operators read it (no body, no secret name)."""

    delivery_id: str
    event_id: str
    event_type: str
    tenant_id: str
    target: str
    url: str
    status: DeliveryStatus
    attempts: int
    created_at_ms: int
    next_attempt_at_ms: int | None = None
    delivered_at_ms: int | None = None
    dead_at_ms: int | None = None
    last_error: str | None = None
    attempt_log: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> WebhookDelivery:
        values: dict[str, Any] = {k: v for k, v in raw.items() if v != "" and k in cls.model_fields}
        values["attempt_log"] = json.loads(raw.get("attempt_log") or "[]")
        return cls.model_validate(values)


class ClaimedDelivery(BaseModel):
    """One attempt a deliverer holds: what to send, where, signed with which secret."""

    delivery_id: str
    claim_token: str
    attempt: int
    event_id: str
    event_type: str
    tenant_id: str
    target: str
    url: str
    secret_env: str
    body: str


class SettleOutcome(BaseModel):
    settled: bool
    status: DeliveryStatus | None = None
    next_attempt_at_ms: int | None = None


def delivery_id(event_id: str, target: str) -> str:
    return DELIVERY_ID_PREFIX + hashlib.sha256(f"{event_id}\x1f{target}".encode()).hexdigest()[:32]


class WebhookOutbox:
    def __init__(self, hot_state: HotState, settings: WebhookDeliverySettings) -> None:
        self.hot_state = hot_state
        self.settings = settings
        self._redis = hot_state.redis
        self._scripts = hot_state.scripts

    def _delivery_key(self, delivery_id: str) -> str:
        return self.hot_state.tagged(WEBHOOKS_TAG, "delivery", delivery_id)

    def _event_key(self, event_id: str) -> str:
        return self.hot_state.tagged(WEBHOOKS_TAG, "event", event_id)

    @property
    def _due(self) -> str:
        return self.hot_state.tagged(WEBHOOKS_TAG, "due")

    @property
    def _dead(self) -> str:
        return self.hot_state.tagged(WEBHOOKS_TAG, "dead")

    async def enqueue(
        self, event_id: str, event_type: str, tenant_id: str, target: WebhookTarget, body: str
    ) -> bool:
        """Add the delivery of `body` to `target` (False: it was already in the outbox)."""
        identifier = delivery_id(event_id, target.name)
        fields = {
            "event_id": event_id,
            "event_type": event_type,
            "tenant_id": tenant_id,
            "target": target.name,
            "url": target.url,
            "secret_env": target.secret_env,
            "body": body,
        }
        reply = await self._scripts["webhook_enqueue"](
            keys=[self._delivery_key(identifier), self._due, self._event_key(event_id)],
            args=[identifier, json.dumps(fields), str(self.settings.dead_retention_ms)],
        )
        return int(reply[0]) == 1

    async def due_ids(self, limit: int) -> list[str]:
        now_ms = await self.hot_state.server_time_ms()
        return list(await self._redis.zrangebyscore(self._due, "-inf", now_ms, start=0, num=limit))

    async def next_due_ms(self) -> int | None:
        """When the earliest delivery becomes due (server clock), or None when none waits."""
        first = await self._redis.zrange(self._due, 0, 0, withscores=True)
        return int(first[0][1]) if first else None

    async def claim(self, delivery_id: str, claim_token: str) -> ClaimedDelivery | None:
        key = self._delivery_key(delivery_id)
        reply = await self._scripts["webhook_claim"](
            keys=[self._due, key], args=[delivery_id, str(self.settings.claim_lease_ms), claim_token]
        )
        if int(reply[0]) != 1:
            return None
        raw = await self._redis.hgetall(key)
        return ClaimedDelivery.model_validate({**raw, "claim_token": claim_token, "attempt": int(reply[2])})

    async def settle(
        self, claimed: ClaimedDelivery, *, delivered: bool, http_status: int | None, error: str
    ) -> SettleOutcome:
        s = self.settings
        reply = await self._scripts["webhook_settle"](
            keys=[self._due, self._delivery_key(claimed.delivery_id), self._dead],
            args=[
                claimed.delivery_id,
                claimed.claim_token,
                "delivered" if delivered else "failed",
                "" if http_status is None else str(http_status),
                error,
                str(s.max_attempts),
                str(s.backoff_base_ms),
                str(s.backoff_max_ms),
                str(s.delivered_retention_ms),
                str(s.dead_retention_ms),
            ],
        )
        if int(reply[0]) != 1:
            return SettleOutcome(settled=False)
        next_at = int(reply[3])
        return SettleOutcome(
            settled=True, status=DeliveryStatus(str(reply[2])), next_attempt_at_ms=next_at or None
        )

    async def delivery(self, delivery_id: str) -> WebhookDelivery | None:
        raw = await self._redis.hgetall(self._delivery_key(delivery_id))
        return WebhookDelivery.from_hash(raw) if raw else None

    async def deliveries_for_event(self, event_id: str) -> list[WebhookDelivery]:
        ids = sorted(await self._redis.smembers(self._event_key(event_id)))
        return await self._existing(ids)

    async def dead_letters(self, *, tenant_id: str | None = None, limit: int = 100) -> list[WebhookDelivery]:
        """The most recent dead-letter records (of one tenant when `tenant_id` is given)."""
        ids = await self._redis.zrevrange(self._dead, 0, -1 if tenant_id else limit - 1)
        dead = [d for d in await self._existing(ids) if tenant_id in (None, d.tenant_id)]
        return dead[:limit]

    async def _existing(self, ids: list[str]) -> list[WebhookDelivery]:
        found = [await self.delivery(identifier) for identifier in ids]
        return [delivery for delivery in found if delivery is not None]
