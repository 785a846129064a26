"""ControlPlaneSettings.from_env: what a deployment of several hosts sets through the environment."""

from __future__ import annotations

import pytest

from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.recovery import DEFAULT_HEALTH_WINDOW_MS


def test_health_recovery_and_scale_out_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "MCP_RUNTIME_SCALE_OUT": "false",
        "MCP_RUNTIME_HEARTBEAT_MS": "250",
        "MCP_RUNTIME_HEALTH_WINDOW_MS": "3000",
        "MCP_RUNTIME_HEALTH_CHECK_INTERVAL_MS": "300",
        "MCP_RUNTIME_RECOVERY_INTERVAL_MS": "400",
    }.items():
        monkeypatch.setenv(name, value)
    settings = ControlPlaneSettings.from_env()
    assert settings.scale_out_enabled is False
    assert (settings.heartbeat_interval_ms, settings.health_window_ms) == (250, 3000)
    assert (settings.health_check_interval_ms, settings.recovery_interval_ms) == (300, 400)


def test_unset_variables_keep_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MCP_RUNTIME_SCALE_OUT", "MCP_RUNTIME_HEALTH_WINDOW_MS", "MCP_RUNTIME_HEARTBEAT_MS"):
        monkeypatch.delenv(name, raising=False)
    settings = ControlPlaneSettings.from_env()
    assert settings.scale_out_enabled is True
    assert settings.health_window_ms == DEFAULT_HEALTH_WINDOW_MS


def test_a_bad_value_is_a_validation_error_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_RUNTIME_HEALTH_WINDOW_MS", "soon")
    with pytest.raises(ValueError, match="health_window_ms"):
        ControlPlaneSettings.from_env()
