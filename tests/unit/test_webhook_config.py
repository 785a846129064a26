"""Webhook signing, its documented verification recipe, the configuration and the callback
allow-list (no Redis, no network)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runtime_core.control_plane import TenantsFile
from runtime_core.events import RunEvent, RunEventType
from runtime_core.webhooks import (
    CALLBACK_TARGET,
    CallbackNotAllowedError,
    TenantWebhooks,
    WebhookSettings,
    check_callback,
    event_targets,
    signature_header,
    verify_signature,
)

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = REPOSITORY / "examples" / "config"
SECRET = "whsec_test_secret"
BODY = b'{"id":"evt_1","type":"run.completed"}'


def documented_verify() -> Any:
    """The `verify` function of docs/mcp.md ("Verifying a webhook"), executed as written."""
    docs = (REPOSITORY / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = docs.split("### Verifying a webhook", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, "docs/mcp.md lost its verification recipe"
    namespace: dict[str, Any] = {}
    exec(code.group(1), namespace)  # running the documented recipe is the point
    return namespace["verify"]


@pytest.mark.parametrize("verify", [verify_signature, documented_verify()], ids=["library", "docs-recipe"])
def test_a_signature_verifies_only_for_its_secret_body_and_a_recent_timestamp(verify: Any) -> None:
    now = int(time.time())
    header = signature_header(SECRET, BODY, now)
    assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", header)
    assert verify(SECRET, BODY, header)
    assert not verify("another-secret", BODY, header)
    assert not verify(SECRET, BODY + b" ", header)
    assert not verify(SECRET, BODY, signature_header(SECRET, BODY, now - 3_600))
    assert not verify(SECRET, BODY, "v1=deadbeef") and not verify(SECRET, BODY, "garbage")


def test_the_example_tenant_settings_file_declares_valid_webhooks() -> None:
    settings = TenantsFile.read(EXAMPLES / "tenants-webhooks.json").webhook_settings()
    tenant = settings.tenant("tenant-a")
    assert settings.enabled and [endpoint.name for endpoint in tenant.endpoints] == ["ops"]
    assert settings.missing_secrets({}) == ["TENANT_A_CALLBACK_SECRET", "TENANT_A_WEBHOOK_SECRET"]
    assert settings.tenant("tenant-b") == TenantWebhooks()
    assert not TenantsFile.read(EXAMPLES / "tenants.json").webhook_settings().enabled


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            {"endpoints": [{"name": "x", "url": "http://h/", "secretEnv": "S", "events": ["run.started"]}]},
            "cannot be sent",
        ),
        ({"callbackHosts": ["h"]}, "callbackHosts needs callbackSecretEnv"),
        ({"endpoints": [{"name": "callback", "url": "http://h/", "secretEnv": "S"}]}, "not 'callback'"),
        ({"endpoints": [{"name": "x", "url": "ftp://h/", "secretEnv": "S"}]}, "should match pattern"),
        ({"endpoints": [{"name": "x", "url": "http://h/", "secret": "inline"}]}, "Extra inputs"),
    ],
)
def test_an_invalid_tenant_webhook_entry_is_refused_naming_the_problem(
    entry: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        TenantWebhooks.model_validate(entry)
    assert problem in str(refused.value)


SETTINGS = WebhookSettings(
    tenants={
        "acme": TenantWebhooks.model_validate(
            {
                "endpoints": [
                    {"name": "all", "url": "https://a.example/all", "secretEnv": "A"},
                    {
                        "name": "ends",
                        "url": "https://a.example/ends",
                        "secretEnv": "B",
                        "events": ["run.completed"],
                    },
                ],
                "callbackHosts": ["Hooks.Acme.Example", "127.0.0.1:9000"],
                "callbackSecretEnv": "C",
            }
        )
    }
)


@pytest.mark.parametrize(
    "url",
    ["https://hooks.acme.example/x", "http://HOOKS.acme.example:8443/y?z=1", "http://127.0.0.1:9000/hook"],
)
def test_an_allow_listed_callback_url_is_accepted(url: str) -> None:
    check_callback(SETTINGS, "acme", url)


@pytest.mark.parametrize(
    ("tenant", "url"),
    [
        ("acme", "http://127.0.0.1:9001/hook"),
        ("acme", "https://evil.example/x"),
        ("globex", "https://hooks.acme.example/x"),
        ("acme", "https://user:pw@hooks.acme.example/x"),
        ("acme", "file:///etc/passwd"),
        ("acme", "https://hooks.acme.example/" + "x" * 2_100),
    ],
)
def test_any_other_callback_url_is_refused(tenant: str, url: str) -> None:
    with pytest.raises(CallbackNotAllowedError) as refused:
        check_callback(SETTINGS, tenant, url)
    assert refused.value.code == "callback_not_allowed" and refused.value.hint


def test_an_event_goes_to_the_endpoints_subscribed_to_its_type_and_the_runs_callback() -> None:
    def targets(
        event_type: RunEventType, tenant: str = "acme", callback: str | None = "https://cb"
    ) -> list[str]:
        event = RunEvent(event_id="evt_1", type=event_type, tenant_id=tenant)
        return [target.name for target in event_targets(SETTINGS, event, callback)]

    assert targets(RunEventType.COMPLETED) == ["all", "ends", CALLBACK_TARGET]
    assert targets(RunEventType.WAITING_FOR_INPUT, callback=None) == ["all"]
    assert targets(RunEventType.COMPLETED, tenant="globex") == []
