"""One realm of the tests' loopback authorization server: its keys, users, clients and tokens.

A realm is an issuer (`<base>/realms/<name>`, Keycloak's URL shape) with generated RSA and EC
signing keys published as a JWKS, users who sign in on its login page, registered clients, and
the state of the flows in progress (authorization codes, refresh tokens, opaque tokens for
introspection, sign-outs). Tests mint tokens directly with `mint` (any claim, key, algorithm or
header a bad-token case needs) or get them through the real endpoints (`tests.oauth_server`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

JwksMode = Literal["up", "down", "slow"]


@dataclass
class SigningKey:
    kid: str
    alg: str
    private_key: Any

    @classmethod
    def generate(cls, kind: Literal["rsa", "ec"], kid: str | None = None) -> SigningKey:
        if kind == "rsa":
            private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            return cls(kid or f"rsa-{secrets.token_hex(4)}", "RS256", private)
        return cls(kid or f"ec-{secrets.token_hex(4)}", "ES256", ec.generate_private_key(ec.SECP256R1()))

    def public_jwk(self) -> dict[str, Any]:
        algorithm = RSAAlgorithm if self.alg.startswith("RS") else ECAlgorithm
        jwk = json.loads(algorithm.to_jwk(self.private_key.public_key()))
        return {**jwk, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@dataclass
class User:
    password: str
    claims: dict[str, Any]
    scopes: tuple[str, ...] = ()  # the scopes this user may be granted (besides openid / profile)


@dataclass
class Client:
    client_id: str
    secret: str | None = None  # None: a public client (PKCE only)
    redirect_uris: tuple[str, ...] = ()
    claims: dict[str, Any] = field(default_factory=dict)  # client credentials: claims of its tokens
    scopes: tuple[str, ...] = ()


@dataclass
class PendingCode:
    client_id: str
    redirect_uri: str
    code_challenge: str
    user: str
    scope: str
    resource: str | None
    nonce: str | None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Realm:
    def __init__(self, base_url: str, name: str, *, default_audience: str = "account") -> None:
        self.base_url = base_url
        self.name = name
        self.default_audience = default_audience
        self.keys = [SigningKey.generate("rsa", "rsa-1"), SigningKey.generate("ec", "ec-1")]
        self.signing_key = self.keys[0]
        self.users: dict[str, User] = {}
        self.clients: dict[str, Client] = {}
        self.jwks_mode: JwksMode = "up"
        self.jwks_requests = 0
        self.slow_release = threading.Event()
        self.codes: dict[str, PendingCode] = {}
        self.refresh_tokens: dict[
            str, tuple[str, str, str | None, str]
        ] = {}  # -> client, user, resource, scope
        self.opaque_tokens: dict[str, dict[str, Any]] = {}
        self.introspections = 0
        self.sign_outs: list[dict[str, str]] = []

    @property
    def issuer(self) -> str:
        return f"{self.base_url}/realms/{self.name}"

    def endpoint(self, name: str) -> str:
        return f"{self.issuer}/{name}"

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.public_jwk() for key in self.keys]}

    # Keys

    def rotate(self, kind: Literal["rsa", "ec"] = "rsa") -> SigningKey:
        """Publish a new key and sign with it from now on (the old one stays published)."""
        key = SigningKey.generate(kind)
        self.keys.append(key)
        self.signing_key = key
        return key

    def remove_key(self, kid: str) -> None:
        self.keys = [key for key in self.keys if key.kid != kid]

    def key(self, kid: str) -> SigningKey:
        return next(key for key in self.keys if key.kid == kid)

    # Tokens

    def mint(
        self,
        subject: str = "alice",
        *,
        audience: str | list[str] | None = None,
        scope: str | None = "mcp:read mcp:operate",
        claims: dict[str, Any] | None = None,
        lifetime_s: int = 300,
        now: float | None = None,
        key: SigningKey | None = None,
        header: dict[str, Any] | None = None,
        omit: tuple[str, ...] = (),
    ) -> str:
        """A signed access token of this realm (RFC 9068 shape) for a user's or any claims."""
        issued = int(now if now is not None else time.time())
        user = self.users.get(subject)
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience if audience is not None else self.default_audience,
            "iat": issued,
            "nbf": issued,
            "exp": issued + lifetime_s,
            "jti": secrets.token_hex(8),
            "client_id": "test-client",
            **(user.claims if user else {}),
            **({"scope": scope} if scope is not None else {}),
            **(claims or {}),
        }
        for name in omit:
            payload.pop(name, None)
        signer = key or self.signing_key
        headers = {"kid": signer.kid, "typ": "at+jwt", **(header or {})}
        return jwt.encode(payload, signer.private_key, algorithm=signer.alg, headers=headers)

    def id_token(self, subject: str, client_id: str, nonce: str | None) -> str:
        issued = int(time.time())
        payload = {
            "iss": self.issuer,
            "sub": subject,
            "aud": client_id,
            "iat": issued,
            "exp": issued + 300,
            **({"nonce": nonce} if nonce else {}),
            **{k: v for k, v in self.users[subject].claims.items() if k in ("name", "preferred_username")},
        }
        key = self.signing_key
        return jwt.encode(payload, key.private_key, algorithm=key.alg, headers={"kid": key.kid, "typ": "JWT"})

    def opaque(self, answer: dict[str, Any]) -> str:
        """An opaque access token whose introspection answers `answer` (plus active / iss)."""
        token = secrets.token_urlsafe(32)
        self.opaque_tokens[token] = {"active": True, "iss": self.issuer, **answer}
        return token

    @staticmethod
    def unsigned(payload: dict[str, Any]) -> str:
        """`alg: none` (no signature at all)."""
        header = _b64(json.dumps({"alg": "none", "typ": "at+jwt"}).encode())
        return f"{header}.{_b64(json.dumps(payload).encode())}."

    @staticmethod
    def hs256_with(secret: bytes, payload: dict[str, Any], kid: str) -> str:
        """HS256 with `secret` as the HMAC key (the classic attack uses the issuer's public key)."""
        header = _b64(json.dumps({"alg": "HS256", "typ": "at+jwt", "kid": kid}).encode())
        body = _b64(json.dumps(payload).encode())
        signature = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
        return f"{header}.{body}.{_b64(signature)}"

    @staticmethod
    def payload_of(token: str) -> dict[str, Any]:
        return jwt.decode(token, options={"verify_signature": False})

    @staticmethod
    def with_payload(token: str, payload: dict[str, Any]) -> str:
        """The same header and signature over a different payload (a tampered token)."""
        header, _, signature = token.split(".")
        return f"{header}.{_b64(json.dumps(payload).encode())}.{signature}"
