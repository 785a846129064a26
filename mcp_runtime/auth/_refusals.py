"""Why a caller was refused: the bounded vocabulary of reasons and the typed refusal of a token.

Owns the reason codes (the refusal metric's label values, the audit records' `reason`) and
`TokenRefusedError`, whose message says what was wrong and what to do, and never quotes the
token. Must not decide anything.
"""

from __future__ import annotations

from enum import StrEnum


class RefusalReason(StrEnum):
    # 401: no usable credentials
    MISSING_TOKEN = "missing_token"
    MALFORMED = "malformed"
    UNKNOWN_TOKEN = "unknown_token"  # neither a configured static token nor a JWT / introspectable token
    UNSUPPORTED_ALGORITHM = "unsupported_algorithm"
    WRONG_TYPE = "wrong_type"
    UNKNOWN_ISSUER = "unknown_issuer"
    UNKNOWN_KEY = "unknown_key"
    KEYS_UNAVAILABLE = "keys_unavailable"
    BAD_SIGNATURE = "bad_signature"
    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    WRONG_AUDIENCE = "wrong_audience"
    INVALID_CLAIMS = "invalid_claims"
    INACTIVE = "inactive"  # introspection said active=false
    NO_TENANT = "no_tenant"
    # 403 / tool errors: authenticated, not allowed
    INSUFFICIENT_SCOPE = "insufficient_scope"
    PERMISSION_DENIED = "permission_denied"


class TokenRefusedError(Exception):
    """A presented token does not authenticate anyone; `str(exc)` is safe to show and log."""

    def __init__(self, reason: RefusalReason, description: str) -> None:
        super().__init__(description)
        self.reason = reason
        self.description = description
