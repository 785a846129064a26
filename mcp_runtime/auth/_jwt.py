"""JWT access tokens (RFC 9068) verified with PyJWT against the trusted issuers' keys.

Owns the order of the checks: the header first (the algorithm must be on the issuer's
allow-list: never `none`, never HMAC; `typ` at+jwt when required), then the issuer named by
`iss` must be trusted, then the signature against that issuer's key for the header's `kid`,
then `iss`, `aud` (this resource, RFC 8707), `exp`, `nbf` and `iat` with the configured skew.
Each failure is a TokenRefusedError with its reason. Must not map claims to a principal.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from mcp_runtime.auth._settings import OAuthSettings

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
    return TokenRefusedError(RefusalReason.MALFORMED, f"the access token is malformed ({detail})")


class JwtVerifier:
    def __init__(self, settings: OAuthSettings, keys: Mapping[str, IssuerKeys]) -> None:
        self._settings = settings
        self._keys = keys  # by issuer identifier

    async def verify(self, token: str) -> tuple[IssuerKeys, dict[str, Any]]:
        """(the issuer, the verified claims), or TokenRefusedError."""
        header = self._header(token)
        issuer = self._issuer(token)
        settings = issuer.issuer
        algorithm = header.get("alg")
        if algorithm not in settings.algorithms:
            raise TokenRefusedError(
                RefusalReason.UNSUPPORTED_ALGORITHM,
                f"the token is signed with {algorithm!r}, which issuer {settings.issuer} may not use "
                f"here (allowed: {', '.join(settings.algorithms)})",
            )
        if settings.require_at_jwt and str(header.get("typ", "")).lower() not in AT_JWT_TYPES:
            raise TokenRefusedError(
                RefusalReason.WRONG_TYPE,
                f"the token's typ is {header.get('typ')!r}, not at+jwt: present an access token, "
                "not an ID token",
            )
        kid = header.get("kid")
        jwk = await issuer.key_for(kid if isinstance(kid, str) else None, algorithm)
        return issuer, self._decode(token, issuer, jwk, algorithm)

    @staticmethod
    def _header(token: str) -> dict[str, Any]:
        try:
            return jwt.get_unverified_header(token)
        except PyJWTError as exc:
            raise _malformed(type(exc).__name__) from None

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

    def _decode(self, token: str, issuer: IssuerKeys, jwk: dict[str, Any], algorithm: str) -> dict[str, Any]:
        try:
            key = jwt.PyJWK(jwk, algorithm=algorithm).key
            return jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=list(self._settings.audiences(issuer.issuer)),
                issuer=issuer.issuer.issuer,
                leeway=self._settings.clock_skew_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except ExpiredSignatureError:
            raise TokenRefusedError(
                RefusalReason.EXPIRED, "the access token has expired; get a new one"
            ) from None
        except ImmatureSignatureError:
            raise TokenRefusedError(
                RefusalReason.NOT_YET_VALID,
                "the access token is not valid yet (nbf or iat in the future); check the clocks",
            ) from None
        except InvalidAudienceError:
            audiences = ", ".join(self._settings.audiences(issuer.issuer))
            raise TokenRefusedError(
                RefusalReason.WRONG_AUDIENCE,
                f"the access token is not for this resource (its aud must include {audiences}); request "
                f"it with resource={self._settings.resource}",
            ) from None
        except InvalidSignatureError:
            raise TokenRefusedError(
                RefusalReason.BAD_SIGNATURE, "the access token's signature is invalid"
            ) from None
        except (InvalidIssuerError, InvalidIssuedAtError, MissingRequiredClaimError) as exc:
            raise TokenRefusedError(
                RefusalReason.INVALID_CLAIMS, f"the access token's claims are invalid ({exc})"
            ) from None
        except PyJWTError as exc:
            raise _malformed(type(exc).__name__) from None
