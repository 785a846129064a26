"""WebhookFanout: the durable run-event stream -> one outbox delivery per event and target.

Owns the run-event stream's `webhooks` consumer group (created, with the stream, the first
time any webhook-enabled control plane starts: events are appended only to an existing
stream, so only events from then on are delivered), reading new entries, resolving each
event's targets (the tenant's endpoints, the run's callback URL from its shared run record),
enqueueing their deliveries, and acknowledging then deleting the entry only after that.
Entries a crashed control plane read but never acknowledged are claimed again after
`claim_lease_ms` (XAUTOCLAIM); enqueueing is idempotent, so at worst an entry is processed
twice, never lost. Must not send HTTP.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError
from redis.exceptions import ResponseError

from runtime_core.events import EVENT_FIELD, RunEvent, RunEventKeys
from runtime_core.hot_state import HotState
from runtime_core.queueing import SharedRunStore
from runtime_core.webhooks._config import WebhookSettings
from runtime_core.webhooks._outbox import WebhookOutbox
from runtime_core.webhooks._targets import event_targets

log = logging.getLogger("runtime_core.webhooks")

CONSUMER_GROUP = "webhooks"
_READ_COUNT = 100


def webhook_body(event: RunEvent) -> str:
    """The JSON a receiver gets (the same bytes on every attempt, so the id de-duplicates)."""
    data = event.model_dump(
        mode="json",
        include={"shared_run_id", "local_run_id", "execution_id", "status", "step", "waiting_key", "reason"},
        exclude_none=True,
    )
    body = {
        "id": event.event_id,
        "type": event.type.value,
        "created_at_ms": event.at_ms,
        "tenant_id": event.tenant_id,
        "data": data,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


class WebhookFanout:
    def __init__(
        self,
        hot_state: HotState,
        settings: WebhookSettings,
        outbox: WebhookOutbox,
        runs: SharedRunStore,
        *,
        consumer: str,
    ) -> None:
        self.settings = settings
        self.outbox = outbox
        self.runs = runs
        self.consumer = consumer
        self._redis = hot_state.redis
        self._stream = RunEventKeys(hot_state).stream

    async def ensure_group(self) -> None:
        try:
            await self._redis.xgroup_create(self._stream, CONSUMER_GROUP, id="$", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def process(self, *, block_ms: int) -> int:
        """Handle abandoned entries, then new ones (waiting up to `block_ms`); how many handled."""
        entries = await self._abandoned() + await self._new(block_ms)
        for entry_id, fields in entries:
            await self._handle(fields)
            await self._consumed(entry_id)
        return len(entries)

    async def _consumed(self, entry_id: str) -> None:
        """Acknowledged and deleted: its deliveries are in the outbox, the stream keeps only
        what is not yet handled (one round trip; both commands address the stream's slot)."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.xack(self._stream, CONSUMER_GROUP, entry_id)
        pipe.xdel(self._stream, entry_id)
        await pipe.execute()

    async def _abandoned(self) -> list[tuple[str, dict[str, str]]]:
        reply = await self._redis.xautoclaim(
            self._stream,
            CONSUMER_GROUP,
            self.consumer,
            self.settings.delivery.claim_lease_ms,
            start_id="0-0",
            count=_READ_COUNT,
        )
        return [(entry_id, fields) for entry_id, fields in reply[1] if fields]

    async def _new(self, block_ms: int) -> list[tuple[str, dict[str, str]]]:
        reply: Any = await self._redis.xreadgroup(
            CONSUMER_GROUP, self.consumer, {self._stream: ">"}, count=_READ_COUNT, block=block_ms
        )
        streams = reply.items() if isinstance(reply, dict) else (reply or [])
        return [(entry_id, fields) for _, entries in streams for entry_id, fields in entries]

    async def _handle(self, fields: dict[str, str]) -> None:
        try:
            event = RunEvent.model_validate_json(fields[EVENT_FIELD])
        except (KeyError, ValidationError):
            log.warning("webhook.bad_stream_entry")
            return
        targets = event_targets(self.settings, event, await self._callback_url(event))
        body = webhook_body(event) if targets else ""
        for target in targets:
            if await self.outbox.enqueue(event.event_id, event.type.value, event.tenant_id, target, body):
                log.info(
                    "webhook.enqueued",
                    extra={
                        "event_id": event.event_id,
                        "event_type": event.type.value,
                        "tenant_id": event.tenant_id,
                        "shared_run_id": event.shared_run_id,
                        "target": target.name,
                    },
                )

    async def _callback_url(self, event: RunEvent) -> str | None:
        if event.shared_run_id is None or not self.settings.tenant(event.tenant_id).callback_hosts:
            return None
        record = await self.runs.get(event.shared_run_id)
        if record is None or record.tenant_id != event.tenant_id:
            return None
        return record.callback_url
