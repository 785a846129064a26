"""Verified claims -> principal: the configured claim paths of an issuer, its roles and scopes.

Owns resolving a claim path (dotted or a list of keys; lists on the way are searched element by
element, a numeric key indexes a list), reading single values (user, tenant, tenant group) and
lists (roles, namespaces, scopes: a JSON list or a space-separated string), mapping issuer role
names to casbin roles, the static tenant alternative, and the refusal of a token whose tenant
cannot be determined. Must not verify anything: it is given claims that are already verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_runtime.auth._principal import Authentication, AuthMethod, Principal
from mcp_runtime.auth._refusals import RefusalReason, TokenRefusedError
from mcp_runtime.auth._scopes import ScopeMap
from mcp_runtime.auth._settings import ClaimPath, IssuerSettings


def resolve(claims: Mapping[str, Any], path: ClaimPath) -> list[Any]:
    """Every value found at `path` (a list found at the end is flattened one level)."""
    keys = path.split(".") if isinstance(path, str) else list(path)
    if isinstance(path, str) and path in claims:
        keys = [path]  # a top-level claim whose name holds dots
    values: list[Any] = [claims]
    for key in keys:
        found: list[Any] = []
        for value in values:
            if isinstance(value, Mapping) and key in value:
                found.append(value[key])
            elif isinstance(value, list):
                if key.isdigit():
                    found.extend(value[int(key) : int(key) + 1])
                else:
                    found.extend(item[key] for item in value if isinstance(item, Mapping) and key in item)
        values = found
    flat: list[Any] = []
    for value in values:
        flat.extend(value if isinstance(value, list) else [value])
    return flat


def _strings(claims: Mapping[str, Any], path: ClaimPath | None) -> list[str]:
    if path is None:
        return []
    words: list[str] = []
    for value in resolve(claims, path):
        if isinstance(value, str):
            words.extend(value.split())
        elif isinstance(value, int | float) and not isinstance(value, bool):
            words.append(str(value))
    return list(dict.fromkeys(words))


def _single(claims: Mapping[str, Any], path: ClaimPath | None, field: str, issuer: str) -> str | None:
    values = [str(value) for value in resolve(claims, path) if isinstance(value, str | int)] if path else []
    distinct = list(dict.fromkeys(values))
    if len(distinct) > 1:
        raise TokenRefusedError(
            RefusalReason.INVALID_CLAIMS,
            f"the token of issuer {issuer} names several values for {field} at claim {_shown(path)} "
            f"({', '.join(distinct)}); ask the identity provider for a token of one {field}",
        )
    return distinct[0] if distinct else None


def _shown(path: ClaimPath | None) -> str:
    return repr(path if isinstance(path, str) else ".".join(path or ()))


def _roles(issuer: IssuerSettings, claims: Mapping[str, Any]) -> tuple[str, ...]:
    named = _strings(claims, issuer.claims.roles)
    if issuer.role_map is not None:
        named = [role for name in named for role in issuer.role_map.get(name, ())]
    return tuple(dict.fromkeys([*issuer.default_roles, *named]))


def principal_from_claims(
    issuer: IssuerSettings, claims: Mapping[str, Any], scopes: ScopeMap, *, token_id: str | None = None
) -> Principal:
    """The principal of a verified token (or introspection answer) of `issuer`."""
    paths = issuer.claims
    user_id = _single(claims, paths.user_id, "user id", issuer.issuer)
    if not user_id:
        raise TokenRefusedError(
            RefusalReason.INVALID_CLAIMS,
            f"the token of issuer {issuer.issuer} has no user id at claim {_shown(paths.user_id)}",
        )
    tenant_id = issuer.static_tenant_id or _single(claims, paths.tenant_id, "tenant", issuer.issuer)
    if not tenant_id:
        raise TokenRefusedError(
            RefusalReason.NO_TENANT,
            f"the token of issuer {issuer.issuer} names no tenant (claim {_shown(paths.tenant_id)} is "
            "missing or empty); ask the identity provider's administrator to add it to the token",
        )
    granted = _strings(claims, paths.scopes)
    has_scope_claim = bool(resolve(claims, paths.scopes))
    narrowed = has_scope_claim or issuer.require_scopes
    namespaces = tuple(_strings(claims, paths.namespaces))
    subject = claims.get("sub")
    return Principal(
        name=user_id,
        user_id=user_id,
        tenant_id=tenant_id,
        tenant_group_id=issuer.static_tenant_group_id
        or _single(claims, paths.tenant_group_id, "tenant group", issuer.issuer),
        roles=_roles(issuer, claims),
        namespaces=namespaces,
        current_namespace=_single(claims, paths.current_namespace, "namespace", issuer.issuer),
        authentication=Authentication(
            method=AuthMethod.OAUTH,
            issuer=issuer.issuer,
            subject=str(subject) if subject is not None else None,
            token_id=token_id,
            client_id=_client_id(claims),
        ),
        scopes=tuple(granted),
        scope_permissions=scopes.permissions(granted) if narrowed else None,
    )


def _client_id(claims: Mapping[str, Any]) -> str | None:
    for name in ("client_id", "azp", "appid"):
        value = claims.get(name)
        if isinstance(value, str):
            return value
    return None
