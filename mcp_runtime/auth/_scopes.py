"""OAuth scopes -> the casbin permissions they let a token use (`rbac_policies/scopes.csv`).

Owns the scopes file format (`scope, object, action` lines, `#` comments), the permissions a
set of granted scopes covers, the scope a refusal names for a missing permission (the first
listed for it), and the list published as `scopes_supported`. Scopes only narrow: this module
never grants anything by itself, the casbin roles still decide. Must not read tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from runtime_core.package_data import shipped_folder

DEFAULT_SCOPES_FILE = shipped_folder("rbac_policies", "mcp_runtime.rbac_policies") / "scopes.csv"


class ScopeMap:
    def __init__(self, grants: Mapping[str, Iterable[str]]) -> None:
        """`grants`: scope -> the `object:action` permissions it covers, in file order."""
        self._grants = {scope: tuple(permissions) for scope, permissions in grants.items()}

    @classmethod
    def load(cls, path: Path = DEFAULT_SCOPES_FILE) -> ScopeMap:
        grants: dict[str, list[str]] = {}
        for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = [field.strip() for field in line.split(",")]
            if len(fields) != 3 or not all(fields):
                raise ValueError(f"{path}:{number}: expected 'scope, object, action', got {raw!r}")
            scope, obj, action = fields
            grants.setdefault(scope, []).append(f"{obj}:{action}")
        return cls(grants)

    @property
    def scopes(self) -> list[str]:
        return list(self._grants)

    def permissions(self, scopes: Iterable[str]) -> frozenset[str]:
        """Every permission the granted scopes cover (unknown scopes, e.g. `openid`, cover none)."""
        return frozenset(permission for scope in scopes for permission in self._grants.get(scope, ()))

    def scope_for(self, permission: str) -> str | None:
        """The scope to ask for when a token lacks `permission`: the first one listed for it."""
        return next((scope for scope, covered in self._grants.items() if permission in covered), None)
