"""The tenants file (MCP_RUNTIME_TENANTS_FILE): read once when a control plane is built, its
`tenants`, `webhooks` and `rateLimits` sections handed to their users, and one typed error
naming the file (and the section) when it cannot be used."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from runtime_core.control_plane import ControlPlane, ControlPlaneSettings, TenantsFile
from runtime_core.errors import ConfigurationError
from runtime_core.hot_state import HotState
from tests.integration.control_plane_support import make_engine

FULL = {
    "tenants": {"tenant-a": {"isolationMode": "Dedicated", "maxRuntimeInstances": 2}},
    "webhooks": {
        "tenant-a": {"callbackHosts": ["hooks.tenant-a.example"], "callbackSecretEnv": "TENANT_A_CALLBACK"}
    },
    "rateLimits": {"tenant-a": [{"name": "runs", "limit": 5, "period": "1s"}]},
}


def _written(tmp_path: Path, content: Any) -> Path:
    path = tmp_path / "tenants.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def _plane(hot_state: HotState, tenants_file: Path) -> ControlPlane:
    engine, control = make_engine(hot_state)
    settings = ControlPlaneSettings(
        host="testhost", local_instances=0, background_pump=False, tenants_file=tenants_file
    )
    return ControlPlane.build(hot_state, engine, control, settings)


async def test_a_control_plane_reads_the_file_once_and_hands_each_section_to_its_user(
    hot_state: HotState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _written(tmp_path, FULL)
    reads: list[Path] = []
    read_text = Path.read_text

    def counting(self: Path, *args: Any, **kwargs: Any) -> str:
        if self == path:
            reads.append(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    plane = _plane(hot_state, path)
    try:
        assert len(reads) == 1
        parts = plane.parts
        assert parts.tenants.resolve("tenant-a").max_runtime_instances == 2
        assert parts.webhooks.tenant("tenant-a").callback_hosts == ["hooks.tenant-a.example"]
        assert [limit.name for limit in parts.controller.rate_limits.of_tenant("tenant-a")] == ["runs"]
    finally:
        await plane.stop()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"tenants": {', re.escape("is not valid JSON (line 1, column 14)")),
        ("[]", "is not a JSON object"),
        ({"rateLimit": {}}, re.escape("unknown section 'rateLimit' (did you mean 'rateLimits'?)")),
        (
            {"tenants": {"tenant-a": {"maxRuntimeInstances": -1}}},
            "The tenants section of the tenants file .* is invalid: tenant-a.maxRuntimeInstances",
        ),
        ({"tenants": {"tenant-a": 3}}, "The tenants section .* is invalid: tenant-a"),
        (
            {"webhooks": {"tenant-a": {"endpoints": "ops"}}},
            "The webhooks section of the tenants file .* is invalid: tenant-a.endpoints",
        ),
        ({"rateLimits": {"tenant-a": {"name": "x"}}}, "The rateLimits section of the tenants file"),
    ],
)
async def test_a_file_that_cannot_be_used_is_one_configuration_error_naming_the_file(
    hot_state: HotState, tmp_path: Path, content: Any, message: str
) -> None:
    path = _written(tmp_path, content)
    with pytest.raises(ConfigurationError, match=message) as refused:
        _plane(hot_state, path)
    assert str(path) in refused.value.message and refused.value.hint


async def test_a_missing_file_is_a_configuration_error_naming_it(hot_state: HotState, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tenants.json"
    with pytest.raises(ConfigurationError, match=r"Cannot read the tenants file .*no-such-tenants\.json"):
        _plane(hot_state, missing)
    with pytest.raises(ConfigurationError, match="Cannot read the tenants file"):
        TenantsFile.read(missing)  # the runtime-instance process reads it the same way


def test_no_file_means_every_default() -> None:
    defaults = TenantsFile.read(None)
    assert defaults.catalog.resolve("anyone").tenant_id == "anyone"
    assert not defaults.webhook_settings().enabled and defaults.rate_limits.of_tenant("anyone") == ()
