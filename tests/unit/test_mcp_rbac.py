"""Casbin RBAC with tenant domains: default roles, per-tenant grants, denial text, reloading."""

from __future__ import annotations

import logging
import logging.config
import os
import shutil
from pathlib import Path

import pytest
import uvicorn.config

from mcp_runtime import (
    DEFAULT_RBAC_MODEL,
    DEFAULT_RBAC_POLICY,
    TOOL_PERMISSIONS,
    Authorizer,
    Permission,
    PermissionDeniedError,
    Principal,
)

READ_TOOLS = {
    "run.status",
    "runs.list",
    "ledger",
    "trace",
    "forensics",
    "recovery.report",
    "pipelines.list",
    "pipelines.validate",
    "steps.list",
    "schedules.list",
    "schedules.get",
    "capacity.list",
    "runs.failed",
}
SCHEDULE_TOOLS = {
    "schedules.create",
    "schedules.pause",
    "schedules.resume",
    "schedules.delete",
    "schedules.trigger",
}
OPERATOR_TOOLS = (
    READ_TOOLS
    | SCHEDULE_TOOLS
    | {
        "submit",
        "queue.drain",
        "cancel",
        "pause",
        "resume",
        "input.submit",
        "replay",
        "runs.retry",
        "runs.cancel",
    }
)


def _principal(*roles: str, tenant: str = "tenant-a", user: str = "u1") -> Principal:
    return Principal(name=user, user_id=user, tenant_id=tenant, roles=roles)


@pytest.fixture
def authorizer() -> Authorizer:
    return Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY)


def _allowed_tools(authorizer: Authorizer, principal: Principal) -> set[str]:
    return {tool for tool, permission in TOOL_PERMISSIONS.items() if authorizer.allows(principal, permission)}


def test_viewer_may_use_exactly_the_read_tools(authorizer: Authorizer) -> None:
    assert _allowed_tools(authorizer, _principal("viewer")) == READ_TOOLS


def test_operator_adds_run_changing_tools_but_not_instances(authorizer: Authorizer) -> None:
    assert _allowed_tools(authorizer, _principal("operator")) == OPERATOR_TOOLS


def test_admin_may_use_every_tool(authorizer: Authorizer) -> None:
    assert _allowed_tools(authorizer, _principal("admin")) == set(TOOL_PERMISSIONS)


def test_principal_without_roles_may_use_nothing(authorizer: Authorizer) -> None:
    assert _allowed_tools(authorizer, _principal()) == set()


def test_denial_names_roles_tenant_and_missing_permission(authorizer: Authorizer) -> None:
    with pytest.raises(PermissionDeniedError) as denied:
        authorizer.require(_principal("viewer"), Permission.RUN_SUBMIT)
    assert str(denied.value) == "permission denied: role(s) [viewer] in tenant 'tenant-a' lack 'run:submit'"


def _policy_copy(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    model, policy = tmp_path / "model.conf", tmp_path / "policy.csv"
    shutil.copy(DEFAULT_RBAC_MODEL, model)
    policy.write_text(DEFAULT_RBAC_POLICY.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return model, policy


def test_per_tenant_user_grant_applies_only_in_that_tenant(tmp_path: Path) -> None:
    authorizer = Authorizer(*_policy_copy(tmp_path, "g, user:alice, operator, tenant-a\n"))
    assert authorizer.allows(_principal(user="alice", tenant="tenant-a"), Permission.RUN_SUBMIT)
    assert not authorizer.allows(_principal(user="alice", tenant="tenant-b"), Permission.RUN_SUBMIT)


def test_policy_file_change_is_picked_up_without_restart(tmp_path: Path) -> None:
    model, policy = _policy_copy(tmp_path)
    authorizer = Authorizer(model, policy)
    assert not authorizer.allows(_principal("viewer"), Permission.RUN_SUBMIT)
    policy.write_text(policy.read_text(encoding="utf-8") + "p, viewer, *, run, submit\n", encoding="utf-8")
    stat = policy.stat()
    os.utime(policy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert authorizer.allows(_principal("viewer"), Permission.RUN_SUBMIT)


def test_reload_policy_rereads_the_file(tmp_path: Path) -> None:
    model, policy = _policy_copy(tmp_path)
    authorizer = Authorizer(model, policy)
    assert authorizer.allows(_principal("viewer"), Permission.RUN_READ)  # decision memoised
    lines = policy.read_text(encoding="utf-8").replace("p, viewer, *, run, read\n", "")
    policy.write_text(lines, encoding="utf-8")
    authorizer.reload_policy()
    assert not authorizer.allows(_principal("viewer"), Permission.RUN_READ)


def test_casbin_logs_no_line_per_decision_even_after_uvicorn_configured_logging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 13.10: casbin logs every enforce() (user, tenant, object) and uvicorn's logging setup
    re-enables the loggers casbin disables; `serve` logs no such line at INFO (nor WARNING)."""
    authorizer = Authorizer(DEFAULT_RBAC_MODEL, DEFAULT_RBAC_POLICY)  # casbin disables its loggers
    logging.config.dictConfig(uvicorn.config.LOGGING_CONFIG)  # what uvicorn.Config does next
    with caplog.at_level(logging.INFO):
        _allowed_tools(authorizer, _principal("admin", user="casbin-quiet"))
        _allowed_tools(authorizer, _principal("viewer", user="casbin-quiet"))
        authorizer.reload_policy()
    assert [record for record in caplog.records if "casbin" in record.name] == []
