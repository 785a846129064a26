"""Casbin RBAC with domains (= tenants): the yes/no on every tool call, narrowed by OAuth scopes.

Owns the enforcer, the decision for a principal and a permission (its roles must grant it and,
for an OAuth caller, its token's scopes must cover it: scopes never widen roles), the denial
message that names what is missing (the role, or the scope to request), and policy reloading
(explicit, and automatic when the model or policy file's mtime changes). Decisions are memoised
per loaded policy (casbin's matcher evaluation costs about a millisecond per call). Must not
look at data: tenant visibility of runs is decided later by the runtime from stored snapshots.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import casbin
from casbin.util import key_match

from mcp_runtime._permissions import Permission
from mcp_runtime.auth import Principal, ScopeMap

_MAX_DECISIONS = 10_000
# casbin logs every enforce() call ("Request: user:x, tenant, object, action ---> False", at
# WARNING for each subject that does not grant, even when another one does), and uvicorn's
# logging setup re-enables the loggers casbin disables. Its enforcer logs here instead, kept
# quiet: decisions that matter are reported as PermissionDeniedError. Lower this logger's
# level to see every decision.
_CASBIN_DECISIONS = logging.getLogger("mcp_runtime.rbac.casbin")
_CASBIN_DECISIONS.setLevel(logging.ERROR)
# The model and the whole policy are dumped at INFO on every (re)load: not operator news.
logging.getLogger("casbin").setLevel(logging.WARNING)


class PermissionDeniedError(Exception):
    """The caller's roles in its tenant do not grant the permission a tool needs."""

    code = "permission_denied"

    def __init__(self, principal: Principal, permission: Permission) -> None:
        roles = ", ".join(principal.roles)
        super().__init__(
            f"permission denied: role(s) [{roles}] in tenant '{principal.tenant_id}' lack '{permission}'"
        )
        self.permission = permission


class InsufficientScopeError(PermissionDeniedError):
    """The caller's roles grant the permission, its token's scopes do not."""

    code = "insufficient_scope"

    def __init__(self, principal: Principal, permission: Permission, scope: str) -> None:
        Exception.__init__(
            self,
            f"insufficient scope: role(s) in tenant '{principal.tenant_id}' grant '{permission}' but the "
            f"token's scopes do not; request scope '{scope}'",
        )
        self.permission = permission
        self.scope = scope


class Authorizer:
    """Answers "may this principal use this permission in its tenant?" from the casbin files."""

    def __init__(self, model_path: Path, policy_path: Path, scopes: ScopeMap | None = None) -> None:
        self.scopes = scopes or ScopeMap.load()
        self._model_path = Path(model_path)
        self._policy_path = Path(policy_path)
        self._lock = threading.Lock()
        self._enforcer, self._loaded_mtimes = self._load()
        self._decisions: dict[tuple[str, ...], bool] = {}

    def reload_policy(self) -> None:
        """Re-read the model and the policy file now."""
        enforcer, mtimes = self._load()
        with self._lock:
            self._enforcer, self._loaded_mtimes = enforcer, mtimes
            self._decisions = {}

    def allows(self, principal: Principal, permission: Permission) -> bool:
        return self.roles_allow(principal, permission) and principal.scopes_permit(permission)

    def roles_allow(self, principal: Principal, permission: str) -> bool:
        """The casbin decision alone (what the principal's roles grant in its tenant)."""
        permission = Permission(permission)
        self._reload_if_changed()
        subjects = (f"user:{principal.user_id}", *principal.roles)
        key = (*subjects, principal.tenant_id, permission.object, permission.action)
        with self._lock:
            decision = self._decisions.get(key)
            if decision is None:
                if len(self._decisions) >= _MAX_DECISIONS:
                    self._decisions.clear()
                decision = self._decisions[key] = any(
                    self._enforcer.enforce(subject, principal.tenant_id, permission.object, permission.action)
                    for subject in subjects
                )
            return decision

    def require(self, principal: Principal, permission: Permission) -> None:
        if not self.roles_allow(principal, permission):
            raise PermissionDeniedError(principal, permission)
        if not principal.scopes_permit(permission):
            raise InsufficientScopeError(
                principal, permission, self.scopes.scope_for(permission) or permission
            )

    def _reload_if_changed(self) -> None:
        if self._mtimes() != self._loaded_mtimes:
            self.reload_policy()

    def _mtimes(self) -> tuple[tuple[int, int], ...]:
        stats = (os.stat(self._model_path), os.stat(self._policy_path))
        return tuple((stat.st_mtime_ns, stat.st_size) for stat in stats)

    def _load(self) -> tuple[casbin.Enforcer, tuple[tuple[int, int], ...]]:
        mtimes = self._mtimes()
        enforcer = casbin.Enforcer(str(self._model_path), str(self._policy_path))
        enforcer.logger = _CASBIN_DECISIONS
        enforcer.add_named_domain_matching_func("g", key_match)
        enforcer.build_role_links()
        return enforcer, mtimes
