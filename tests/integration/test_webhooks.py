"""Webhooks (issue 15 item 5) against loopback receivers (real uvicorn HTTP servers).

A run's end is delivered from the durable outbox, signed (HMAC-SHA256, `t=...,v1=...`), at
least once: a receiver failing twice gets the same event three times, spaced by the
exponential back-off, verifies the signature on the third and exactly one delivery of that
event id is recorded as delivered; a receiver that never answers ends in a dead-letter
record while the run itself finished long before. Per-submit callback URLs must be on an
allow-listed host. Pending work survives a control-plane restart. No secret reaches a log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from runtime_core.control_plane import ControlPlane
from runtime_core.events import RunEventKeys, RunEventType, terminal_event_id
from runtime_core.hot_state import HotState
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from runtime_core.webhooks import (
    ATTEMPT_HEADER,
    CALLBACK_TARGET,
    CallbackNotAllowedError,
    DeliveryStatus,
    TenantWebhooks,
    WebhookConfigError,
    WebhookDelivery,
    WebhookDeliverySettings,
    WebhookEndpoint,
    WebhookService,
    WebhookSettings,
)
from tests.helpers import wait_until
from tests.integration.control_plane_support import evented_control_plane, start_instance
from tests.integration.webhook_support import WebhookReceiver

TENANT = ExecutionContextSnapshot(user_id="wendy", tenant_id="hooks-tenant", context_key="test-hooks")
ENDPOINT_SECRET_ENV = "H15_TEST_ENDPOINT_SECRET"
CALLBACK_SECRET_ENV = "H15_TEST_CALLBACK_SECRET"
ONE_STEP = parse_pipeline({"name": "hooked", "steps": [{"name": "only", "stepKey": "test.noop"}]})
BACKOFF_MS = 200
FAST = WebhookDeliverySettings(
    max_attempts=3, backoff_base_ms=BACKOFF_MS, timeout_ms=300, claim_lease_ms=1_000, idle_interval_ms=20
)


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        ENDPOINT_SECRET_ENV: "whsec_" + secrets.token_hex(16),
        CALLBACK_SECRET_ENV: "cbsec_" + secrets.token_hex(16),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def settings_for(endpoint_url: str | None, *, callback_hosts: tuple[str, ...] = ()) -> WebhookSettings:
    endpoints = (
        [WebhookEndpoint(name="ops", url=endpoint_url, secret_env=ENDPOINT_SECRET_ENV)]
        if endpoint_url
        else []
    )
    tenant = TenantWebhooks(
        endpoints=endpoints,
        callback_hosts=list(callback_hosts),
        callback_secret_env=CALLBACK_SECRET_ENV if callback_hosts else None,
    )
    return WebhookSettings(tenants={TENANT.tenant_id: tenant}, delivery=FAST)


@dataclass
class Rig:
    hot_state: HotState
    plane: ControlPlane
    webhooks: WebhookService

    async def run_to_end(self, **submit: str) -> str:
        submitted = await self.plane.submit(ONE_STEP, {}, SubmitMode.DIRECT_DISPATCH, TENANT, **submit)

        async def done() -> bool:
            local = await self.plane.parts.index.get_by_shared(submitted.shared_run_id)
            return local is not None and local.status.is_terminal

        await wait_until(done, timeout=20)
        return submitted.shared_run_id

    async def delivery_of(
        self, shared_run_id: str, status: DeliveryStatus, target: str = "ops"
    ) -> WebhookDelivery:
        event_id = terminal_event_id(RunEventType.COMPLETED, shared_run_id, None)

        async def settled() -> bool:
            found = await self.webhooks.outbox.deliveries_for_event(event_id)
            return any(d.target == target and d.status is status for d in found)

        await wait_until(settled, timeout=20, interval=0.02)
        [delivery] = [
            d for d in await self.webhooks.outbox.deliveries_for_event(event_id) if d.target == target
        ]
        return delivery


@asynccontextmanager
async def rig_with(
    hot_state: HotState, settings: WebhookSettings, consumer: str = "test-a"
) -> AsyncIterator[Rig]:
    """A control plane whose runs publish events, one local instance, and the webhook loops."""
    plane, publisher = evented_control_plane(hot_state, host="hookhost", webhooks=settings)
    webhooks = await WebhookService(hot_state, settings, plane.parts.runs, consumer=consumer).start()
    await start_instance(plane)
    try:
        yield Rig(hot_state, plane, webhooks)
    finally:
        await webhooks.stop()
        await plane.stop()
        await publisher.aclose()


async def test_a_receiver_failing_twice_verifies_the_third_delivery_and_one_event_id_is_delivered(
    hot_state: HotState, secrets_in_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    secret = secrets_in_env[ENDPOINT_SECRET_ENV]
    caplog.set_level(logging.DEBUG)
    async with WebhookReceiver(secret, fail_first=2).serving() as receiver:
        async with rig_with(hot_state, settings_for(receiver.url)) as rig:
            run_id = await rig.run_to_end()
            delivery = await rig.delivery_of(run_id, DeliveryStatus.DELIVERED)
            assert await hot_state.redis.xlen(RunEventKeys(hot_state).stream) == 0  # consumed, deleted
    event_id = terminal_event_id(RunEventType.COMPLETED, run_id, None)
    assert [r.event_id for r in receiver.received] == [event_id] * 3
    assert [r.headers[ATTEMPT_HEADER.lower()] for r in receiver.received] == ["1", "2", "3"]
    assert len({r.body for r in receiver.received}) == 1 and len(receiver.accepted) == 1
    assert all(r.verifies_with(secret) for r in receiver.received)
    assert not receiver.received[0].verifies_with("another-secret")
    body = json.loads(receiver.accepted[0].body)
    assert body["id"] == event_id and body["type"] == "run.completed"
    assert body["tenant_id"] == TENANT.tenant_id and body["data"]["shared_run_id"] == run_id
    gaps = [
        later.at - earlier.at
        for earlier, later in zip(receiver.received, receiver.received[1:], strict=False)
    ]
    assert gaps[0] >= (BACKOFF_MS - 5) / 1000 and gaps[1] >= (2 * BACKOFF_MS - 5) / 1000
    assert delivery.attempts == 3 and delivery.event_id == event_id
    assert [entry["outcome"] for entry in delivery.attempt_log] == ["failed", "failed", "delivered"]
    logged = " ".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    assert "webhook.delivered" in logged
    assert all(value not in logged for value in secrets_in_env.values())
    assert receiver.accepted[0].headers["mcp-runtime-signature"] not in logged


async def test_a_receiver_that_never_answers_ends_in_a_dead_letter_record_and_the_run_never_waited(
    hot_state: HotState, secrets_in_env: dict[str, str]
) -> None:
    async with WebhookReceiver(secrets_in_env[ENDPOINT_SECRET_ENV], hang=True).serving() as receiver:
        async with rig_with(hot_state, settings_for(receiver.url)) as rig:
            run_id = await rig.run_to_end()
            assert (await rig.plane.run_status(run_id, TENANT)).local_status == "Completed"
            dead = await rig.delivery_of(run_id, DeliveryStatus.DEAD)
            letters = await rig.webhooks.outbox.dead_letters(tenant_id=TENANT.tenant_id)
    assert [letter.delivery_id for letter in letters] == [dead.delivery_id]
    assert dead.attempts == FAST.max_attempts and len(receiver.received) == FAST.max_attempts
    assert all(entry["error"] == "no answer within 300 ms" for entry in dead.attempt_log)
    assert dead.dead_at_ms is not None and dead.last_error == "no answer within 300 ms"


async def test_a_callback_url_receives_the_end_signed_with_the_tenants_callback_secret(
    hot_state: HotState, secrets_in_env: dict[str, str]
) -> None:
    secret = secrets_in_env[CALLBACK_SECRET_ENV]
    async with WebhookReceiver(secret).serving() as receiver:
        async with rig_with(hot_state, settings_for(None, callback_hosts=("127.0.0.1",))) as rig:
            run_id = await rig.run_to_end(callback_url=f"{receiver.url}?run=mine")
            delivery = await rig.delivery_of(run_id, DeliveryStatus.DELIVERED, target=CALLBACK_TARGET)
    assert delivery.url == f"{receiver.url}?run=mine" and delivery.attempts == 1
    assert [r.event_id for r in receiver.accepted] == [delivery.event_id]
    assert not receiver.accepted[0].verifies_with(secrets_in_env[ENDPOINT_SECRET_ENV])


async def test_a_callback_url_on_a_host_not_allow_listed_is_refused_and_nothing_is_submitted(
    hot_state: HotState, secrets_in_env: dict[str, str]
) -> None:
    token = secrets.token_hex(8)
    refusals = {
        f"https://evil.example.net/hook?token={token}": "host 'evil.example.net' is not allow-listed",
        f"https://user:{token}@hooks.example.com/hook": "must not carry credentials",
        "ftp://hooks.example.com/x": "absolute http(s) URL",
        "not a url": "absolute http(s) URL",
    }
    async with rig_with(hot_state, settings_for(None, callback_hosts=("hooks.example.com",))) as rig:
        for url, reason in refusals.items():
            with pytest.raises(CallbackNotAllowedError) as refused:
                await rig.plane.submit(ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT, callback_url=url)
            assert refused.value.code == "callback_not_allowed"
            assert reason in refused.value.message and token not in str(refused.value)
        assert await rig.plane.parts.runs.list_tenant(TENANT.tenant_id) == []
        allowed = await rig.plane.submit(
            ONE_STEP, {}, SubmitMode.QUEUE_FIRST, TENANT, callback_url="https://HOOKS.example.com/runs"
        )
        record = await rig.plane.parts.runs.get(allowed.shared_run_id)
        assert record is not None and record.callback_url == "https://HOOKS.example.com/runs"


async def test_pending_deliveries_and_unacknowledged_events_survive_a_control_plane_restart(
    hot_state: HotState, secrets_in_env: dict[str, str]
) -> None:
    """Plane A reads the end of a run, then stops before delivering anything; plane B, started
    later on the same Redis, reclaims the unacknowledged stream entry and delivers it."""
    secret = secrets_in_env[ENDPOINT_SECRET_ENV]
    async with WebhookReceiver(secret).serving() as receiver:
        settings = settings_for(receiver.url)
        async with rig_with(hot_state, settings, consumer="plane-a") as first:
            await first.webhooks.stop()  # its loops stop: nothing delivers while the run ends
            run_id = await first.run_to_end()
            unacknowledged = await first.webhooks.fanout._new(block_ms=1_000)  # read, never acknowledged
            assert len(unacknowledged) == 1
        async with rig_with(hot_state, settings, consumer="plane-b") as second:
            delivery = await second.delivery_of(run_id, DeliveryStatus.DELIVERED)
    assert [r.event_id for r in receiver.accepted] == [delivery.event_id]


async def test_the_service_refuses_to_start_without_its_signing_secrets(hot_state: HotState) -> None:
    with pytest.raises(WebhookConfigError) as refused:
        await WebhookService(hot_state, settings_for("http://127.0.0.1:9/hook"), None, consumer="x").start()  # type: ignore[arg-type]
    assert ENDPOINT_SECRET_ENV in str(refused.value)


async def test_readiness_sees_both_webhook_loops_and_one_that_ended(
    hot_state: HotState, secrets_in_env: dict[str, str]
) -> None:
    async with rig_with(hot_state, settings_for("http://127.0.0.1:9/hook")) as rig:
        assert rig.webhooks.loops_alive() == {"webhook_fanout": True, "webhook_delivery": True}
        [delivery] = [task for task in asyncio.all_tasks() if task.get_name() == "webhook-delivery"]
        delivery.cancel()
        await asyncio.gather(delivery, return_exceptions=True)
        assert rig.webhooks.loops_alive() == {"webhook_fanout": True, "webhook_delivery": False}
    assert rig.webhooks.loops_alive() == {"webhook_fanout": False, "webhook_delivery": False}
