"""HTTP replies and transport errors -> StepFailure codes, Retry-After parsing, secret redaction."""

from __future__ import annotations

import email.utils

import httpx
import pytest

from runtime_core.steps import redact, retry_after_ms
from runtime_core.steps._http_failures import failure_for_status, failure_for_transport

NOW = 1_800_000_000.0


def reply(status: int, text: str = "", headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, text=text, headers=headers, request=httpx.Request("POST", "http://x/y"))


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("2", 2_000),
        ("0.25", 250),
        (" 7 ", 7_000),
        (email.utils.formatdate(NOW + 30, usegmt=True), 30_000),
        (email.utils.formatdate(NOW - 30, usegmt=True), 0),
        ("-3", 0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_delta_seconds_or_an_http_date(header: str | None, expected: int | None) -> None:
    assert retry_after_ms(header, now_s=NOW) == expected


@pytest.mark.parametrize(
    ("status", "code", "has_floor"),
    [
        (429, "transient", True),
        (503, "transient", True),
        (500, "transient", False),
        (502, "transient", False),
        (408, "timeout", False),
        (400, "permanent", False),
        (401, "unauthenticated", False),
        (403, "permission_denied", False),
        (404, "permanent", False),
        (422, "permanent", False),
    ],
)
def test_status_codes_map_to_retry_classes(status: int, code: str, has_floor: bool) -> None:
    failure = failure_for_status("POST http://x/y", reply(status, headers={"Retry-After": "3"}))
    assert failure is not None
    assert failure.code == code
    assert failure.retry_after_ms == (3_000 if has_floor else None)


def test_a_2xx_reply_is_no_failure_and_404_may_mean_not_found() -> None:
    assert failure_for_status("GET u", reply(204)) is None
    failure = failure_for_status("GET u", reply(404), not_found_code="not_found")
    assert failure is not None and failure.code == "not_found"


def test_transport_errors_are_timeout_or_transient() -> None:
    request = httpx.Request("GET", "http://x")
    assert failure_for_transport("GET x", httpx.ReadTimeout("slow", request=request)).code == "timeout"
    assert failure_for_transport("GET x", httpx.ConnectError("refused", request=request)).code == "transient"


def test_secrets_in_a_reply_body_are_redacted_from_the_failure() -> None:
    failure = failure_for_status("POST u", reply(401, text="bad key sk-abc123"), secrets=["sk-abc123"])
    assert failure is not None and "sk-abc123" not in failure.message and "[redacted]" in failure.message
    assert redact("a s3cr3t b s3cr3t", ["s3cr3t", ""]) == "a [redacted] b [redacted]"
