"""JWTs verified with PyJWT against the trusted issuers' keys: access tokens (RFC 9068), ID tokens.

Owns the order of the checks (`verify_signed`): the header first (the algorithm must be on the
issuer's allow-list: never `none`, never HMAC; `typ` at+jwt when required), then the signature
against that issuer's key for the header's `kid`, then `iss`, `aud` (this resource for an access
token, RFC 8707; the dashboard's client for an ID token), `exp`, `nbf` and `iat` with the
configured skew; and for access tokens (`JwtVerifier`) choosing the issuer by `iss`, which must be
trusted. Each failure is a TokenRefusedError with its reason; no message quotes the caller's text.
Must not map claims to a principal.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAudienceError,
    InvalidIssuedAtError,
    InvalidIssuerError,
    InvalidSignatureError,
    MissingRequiredClaimError,
    PyJWTError,
)

from mcp_runtime.auth._issuer_keys import IssuerKeys
from mcp_runtime.auth._refusals import RefusalReason, TokenRefusedError
from mcp_runtime.auth._settings import SUPPORTED_ALGORITHMS, OAuthSettings

AT_JWT_TYPES = frozenset({"at+jwt", "application/at+jwt"})


def _segment(text: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def unverified_parts(token: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(header, payload) of a JWS compact serialization, unverified: only to route the token (which
    issuer, which key) before PyJWT verifies it. None when it is not one. (PyJWT's own unverified
    reads cost about 0.2 ms each, most of the verification's time.)"""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header, payload = _segment(parts[0]), _segment(parts[1])
    except (ValueError, binascii.Error):
        return None
    return (header, payload) if isinstance(header, dict) and isinstance(payload, dict) else None


def looks_like_jwt(token: str) -> bool:
    """Three dot-separated parts whose first two decode to JSON objects (a JWS compact serialization)."""
    return unverified_parts(token) is not None


@dataclass(frozen=True)
class VerifiedJwt:
    issuer: IssuerKeys
    claims: dict[str, Any]
    kid: str | None


def _malformed(detail: str) -> TokenRefusedError:
    return TokenRefusedError(RefusalReason.MALFORMED, f"the token is malformed ({detail})")


class JwtVerifier:
    """Access tokens of any trusted issuer, for this resource."""

    def __init__(self, settings: OAuthSettings, keys: Mapping[str, IssuerKeys]) -> None:
        self._settings = settings
        self._keys = keys  # by issuer identifier

    async def verify(self, token: str) -> VerifiedJwt:
        """The issuer, the verified claims and the key id, or TokenRefusedError."""
        parts = unverified_parts(token)
        if parts is None:
            raise _malformed("not a JWS compact serialization")
        header, payload = parts
        issuer = self._issuer(payload)
        claims = await verify_signed(
            token,
            issuer,
            audiences=self._settings.audiences(issuer.issuer),
            leeway=self._settings.clock_skew_s,
            require_at_jwt=issuer.issuer.require_at_jwt,
            header=header,
        )
        kid = header.get("kid")
        return VerifiedJwt(issuer, claims, kid if isinstance(kid, str) else None)

    def _issuer(self, unverified: dict[str, Any]) -> IssuerKeys:
        iss = unverified.get("iss")
        issuer = self._keys.get(iss) if isinstance(iss, str) else None
        if issuer is None:  # the unverified `iss` is not echoed: it is the caller's text
            trusted = ", ".join(self._keys)
            raise TokenRefusedError(
                RefusalReason.UNKNOWN_ISSUER, f"the token's issuer is not trusted here (trusted: {trusted})"
            )
        return issuer


async def verify_signed(
    token: str,
    issuer: IssuerKeys,
    *,
    audiences: Sequence[str],
    leeway: float,
    require_at_jwt: bool = False,
    header: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The claims of a JWS of `issuer` (an access token, or an ID token with its client as audience)
    after every check, or TokenRefusedError saying which failed. `header`: the token's, when read."""
    settings = issuer.issuer
    if header is None:
        parts = unverified_parts(token)
        if parts is None:
            raise _malformed("not a JWS compact serialization")
        header = parts[0]
    algorithm = header.get("alg")
    if algorithm not in settings.algorithms:
        shown = (
            algorithm if algorithm in SUPPORTED_ALGORITHMS or algorithm in ("none", "HS256") else "another"
        )
        raise TokenRefusedError(
            RefusalReason.UNSUPPORTED_ALGORITHM,
            f"the token is signed with algorithm {shown}, which issuer {settings.issuer} may not use here "
            f"(allowed: {', '.join(settings.algorithms)})",
        )
    if require_at_jwt and str(header.get("typ", "")).lower() not in AT_JWT_TYPES:
        raise TokenRefusedError(
            RefusalReason.WRONG_TYPE,
            "the token's typ is not at+jwt: present an access token, not an ID token",
        )
    kid = header.get("kid")
    jwk = await issuer.key_for(kid if isinstance(kid, str) else None, algorithm)
    try:
        return jwt.decode(
            token,
            jwt.PyJWK(jwk, algorithm=algorithm).key,
            algorithms=[algorithm],
            audience=list(audiences),
            issuer=settings.issuer,
            leeway=leeway,
            options={"require": ["exp", "iss", "aud"]},
        )
    except ExpiredSignatureError:
        raise TokenRefusedError(RefusalReason.EXPIRED, "the token has expired; get a new one") from None
    except ImmatureSignatureError:
        raise TokenRefusedError(
            RefusalReason.NOT_YET_VALID,
            "the token is not valid yet (nbf or iat in the future); check the clocks",
        ) from None
    except InvalidAudienceError:
        raise TokenRefusedError(
            RefusalReason.WRONG_AUDIENCE,
            f"the token is not for this resource: its aud must include {', '.join(audiences)} (RFC 8707: "
            "request it with that resource)",
        ) from None
    except InvalidSignatureError:
        raise TokenRefusedError(RefusalReason.BAD_SIGNATURE, "the token's signature is invalid") from None
    except (InvalidIssuerError, InvalidIssuedAtError, MissingRequiredClaimError) as exc:
        raise TokenRefusedError(
            RefusalReason.INVALID_CLAIMS, f"the token's claims are invalid ({exc})"
        ) from None
    except PyJWTError as exc:
        raise _malformed(type(exc).__name__) from None
