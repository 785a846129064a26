"""What a run view may show of a value: secrets taken out, size capped.

Secrets reach a run's data in several ways, and each is taken out before anything is shown:
- a field named like a credential (`password`, `apiKey`, `authorization`, `client_secret`,
  `accessToken`, ...) in a run's input, a step's literal inputs or output, a ledger attribute:
  its value is replaced whatever it looks like (numbers and booleans, e.g. token counts, stay);
- a credential inside any text: `Bearer ...`, JWTs, provider keys (`sk-...`), GitHub / Slack /
  AWS keys, PEM private keys, `user:password@` in URLs (an HTTP step echoing its request);
- the value of an environment variable of this process that holds a secret (named like one,
  or named by the providers file: `api_key_env`, ...), wherever it appears, e.g. a provider
  that echoed the key it got.
`Redactor.value` / `Redactor.text` do that; `shown` renders a value as pretty JSON capped at a
size (the rest is counted, not sent). Must not read anything but the environment it is given.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

REDACTED = "[redacted]"
PREVIEW_CHARS = 90
MIN_SECRET_CHARS = 8
"""Shorter environment values are not treated as secrets (they would redact common words)."""

_SECRET_NAMES = frozenset(
    {"authorization", "proxyauthorization", "cookie", "setcookie", "bearer", "dsn", "sessionid", "xapikey"}
)
_SECRET_SUFFIXES = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "privatekey",
    "accesskey",
    "secretkey",
    "credential",
    "credentials",
    "conninfo",
    "connectionstring",
    "signature",
)
_SECRET_ENV_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|ACCESS_KEY|CREDENTIAL|_KEY$|_URI$)"
)
_PATTERNS = [
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), REDACTED),
    (re.compile(r"\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), rf"\1{REDACTED}@"),
]


def secret_key(name: str) -> bool:
    """A field name that holds a credential (compared without case, `_`, `-` or `.`)."""
    normalized = re.sub(r"[-_.\s]", "", name.lower())
    return normalized in _SECRET_NAMES or normalized.endswith(_SECRET_SUFFIXES)


class Redactor:
    def __init__(self, known_secrets: Iterable[str] = ()) -> None:
        # Longest first: a secret containing another is replaced whole.
        values = {value for value in known_secrets if len(value) >= MIN_SECRET_CHARS}
        self._known = sorted(values, key=len, reverse=True)

    @classmethod
    def from_environment(
        cls, env: Mapping[str, str] = os.environ, secret_variables: Iterable[str] = ()
    ) -> Redactor:
        """Secrets are the values of variables named like one, and of `secret_variables` (the
        ones the providers file and tenant settings name)."""
        named = set(secret_variables)
        return cls(value for name, value in env.items() if name in named or _SECRET_ENV_NAME.search(name))

    def text(self, text: str) -> str:
        for secret in self._known:
            text = text.replace(secret, REDACTED)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    def value(self, value: Any) -> Any:
        """A copy of a JSON value with every secret replaced by `[redacted]`."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {str(key): self._field(str(key), item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value

    def _field(self, name: str, value: Any) -> Any:
        if secret_key(name) and value is not None and not isinstance(value, bool | int | float):
            return REDACTED
        return self.value(value)


@dataclass(frozen=True)
class ShownValue:
    """A value as a page shows it: its JSON text (cut at the cap) and how much was left out."""

    text: str
    total_chars: int
    omitted_chars: int
    preview: str
    """The value on one line, cut at PREVIEW_CHARS (for a table cell's closed disclosure)."""

    @property
    def summary(self) -> str:
        size = f"{self.total_chars:,} characters"
        return f"{size}, first {len(self.text):,} shown" if self.omitted_chars else size


def shown(value: Any, redactor: Redactor, max_chars: int) -> ShownValue:
    """`value` redacted, as indented JSON (a string as itself), at most `max_chars` of it."""
    clean = redactor.value(value)
    text = clean if isinstance(clean, str) else json.dumps(clean, indent=2, ensure_ascii=False, default=str)
    line = clean if isinstance(clean, str) else json.dumps(clean, ensure_ascii=False, default=str)
    preview = line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"
    omitted = max(0, len(text) - max_chars)
    return ShownValue(text=text[:max_chars], total_chars=len(text), omitted_chars=omitted, preview=preview)
