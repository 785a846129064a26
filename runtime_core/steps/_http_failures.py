"""HTTP replies and transport errors as StepFailures: the one mapping every HTTP-backed step uses.

Owns status classification for the retry engine (429 and 503: `transient` with the reply's
`Retry-After` as the earliest retry; other 5xx: `transient`; 408: `timeout`; 404: the
caller's choice; 401: `unauthenticated` and 403: `permission_denied`, said in words naming the
credentials the caller sent, whatever the body; other 3xx/4xx: `permanent`), transport errors
(timeouts: `timeout`, connection errors: `transient`), `Retry-After` parsing (delta-seconds or
HTTP-date) and redacting secrets from failure text. Must not retry, log, or read secrets itself.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable

import httpx

from runtime_core.policy import PERMISSION_DENIED_FAILURE_CODE, UNAUTHENTICATED_FAILURE_CODE
from runtime_core.steps._executor import StepFailure

RETRY_AFTER_STATUSES = frozenset({429, 503})
REDACTED = "[redacted]"
_BODY_CHARS = 200


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a secret replaced (a provider may echo the key it got)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def retry_after_ms(value: str | None, *, now_s: float | None = None) -> int | None:
    """A `Retry-After` header in milliseconds from now: delta-seconds or an HTTP-date; None if unusable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now_s is None else now_s)
    if seconds != seconds or seconds < 0:  # NaN or in the past: retry whenever the backoff says
        return 0
    return int(seconds * 1000 + 0.999)


def failure_for_status(
    what: str,
    response: httpx.Response,
    *,
    secrets: Iterable[str] = (),
    not_found_code: str = "permanent",
    credentials: str = "the credentials the request sent",
) -> StepFailure | None:
    """The failure a non-2xx reply means (None for 2xx); `what` names the call, e.g. `POST <url>`;
    `credentials` says what the request authenticated with (a 401 / 403 names it)."""
    status = response.status_code
    if status < 300:
        return None
    body = redact(response.text[:_BODY_CHARS], secrets)
    if status in (401, 403):
        return _refused(what, status, body, credentials)
    message = redact(f"{what} answered {status}: {body}", secrets)
    if status in RETRY_AFTER_STATUSES:
        wait_ms = retry_after_ms(response.headers.get("retry-after"))
        return StepFailure(message, code="transient", retry_after_ms=wait_ms)
    if status >= 500:
        return StepFailure(message, code="transient")
    if status == 408:
        return StepFailure(message, code="timeout")
    if status == 404:
        return StepFailure(message, code=not_found_code)
    return StepFailure(message, code="permanent")


def _refused(what: str, status: int, body: str, credentials: str) -> StepFailure:
    """A 401 (authentication) or 403 (authorization) said as such, even with an empty body."""
    said = f" It said: {body.strip()}" if body.strip() else ""
    if status == 401:
        return StepFailure(
            f"{what} answered 401 Unauthorized: authentication failed, the provider did not accept "
            f"{credentials}.{said}",
            code=UNAUTHENTICATED_FAILURE_CODE,
        )
    return StepFailure(
        f"{what} answered 403 Forbidden: authorization failed, {credentials} may not make this request "
        f"(check what the key is allowed: the model, the endpoint, the project).{said}",
        code=PERMISSION_DENIED_FAILURE_CODE,
    )


def failure_for_transport(what: str, error: httpx.HTTPError, *, secrets: Iterable[str] = ()) -> StepFailure:
    """A request that got no reply: timeouts are `timeout`, any other transport error `transient`."""
    code = "timeout" if isinstance(error, httpx.TimeoutException) else "transient"
    verb = "timed out" if code == "timeout" else "failed"
    return StepFailure(redact(f"{what} {verb}: {type(error).__name__} {error}", secrets), code=code)
