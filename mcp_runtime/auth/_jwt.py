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

from collections.abc import Mapping, Sequence
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


def looks_like_jwt(token: str) -> bool:
    """Three dot-separated parts whose first decodes to a JSON object (a JWS compact serialization)."""
    if token.count(".") != 2:
        return False
    try:
        return isinstance(jwt.get_unverified_header(token), dict)
    except PyJWTError:
        return False


def _malformed(detail: str) -> TokenRefusedError:
    return TokenRefusedError(RefusalReason.MALFORMED, f"the token is malformed ({detail})")


class JwtVerifier:
    """Access tokens of any trusted issuer, for this resource."""

    def __init__(self, settings: OAuthSettings, keys: Mapping[str, IssuerKeys]) -> None:
        self._settings = settings
        self._keys = keys  # by issuer identifier

    async def verify(self, token: str) -> tuple[IssuerKeys, dict[str, Any]]:
        """(the issuer, the verified claims), or TokenRefusedError."""
        issuer = self._issuer(token)
        claims = await verify_signed(
            token,
            issuer,
            audiences=self._settings.audiences(issuer.issuer),
            leeway=self._settings.clock_skew_s,
            require_at_jwt=issuer.issuer.require_at_jwt,
        )
        return issuer, claims

    def _issuer(self, token: str) -> IssuerKeys:
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except PyJWTError as exc:
            raise _malformed(type(exc).__name__) from None
        iss = unverified.get("iss")
        issuer = self._keys.get(iss) if isinstance(iss, str) else None
        if issuer is None:  # the unverified `iss` is not echoed: it is the caller's text
            trusted = ", ".join(self._keys)
            raise TokenRefusedError(
                RefusalReason.UNKNOWN_ISSUER, f"the token's issuer is not trusted here (trusted: {trusted})"
            )
        return issuer


async def verify_signed(
    token: str, issuer: IssuerKeys, *, audiences: Sequence[str], leeway: float, require_at_jwt: bool = False
) -> dict[str, Any]:
    """The claims of a JWS of `issuer` (an access token, or an ID token with its client as audience)
    after every check, or TokenRefusedError saying which failed."""
    settings = issuer.issuer
    try:
        header = jwt.get_unverified_header(token)
    except PyJWTError as exc:
        raise _malformed(type(exc).__name__) from None
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
