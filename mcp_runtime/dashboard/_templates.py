"""The dashboard's HTML: its Jinja environment (autoescaped: every id, name and error is data),
its filters for times and durations (relative with the exact time on hover, elapsed since), and
the responses that render a page or an error.

Owns turning a failure into its page: the same `[code] ... Next: ...` text the tool doing the
same would answer, with the HTTP status of its kind (an unknown or foreign run is 404, a
missing permission 403, the store unreachable 503). Must not read any service.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse

from mcp_runtime._errors import tool_error_text
from mcp_runtime._guard import AuthenticationRequiredError
from mcp_runtime._rbac import PermissionDeniedError
from mcp_runtime.dashboard._input_form import InvalidFormError
from mcp_runtime.dashboard._security import UI_PATH
from mcp_runtime.run_view import (
    STEP_LEGEND,
    clock_text,
    duration_text,
    exact_text,
    iso_text,
    relative_text,
    status_style,
    template_environment,
)
from runtime_core.errors import ConflictError, NotFoundError, StoreUnavailableError


def _when(value: datetime | None, precise: bool = False) -> str:
    if value is None:
        return "-"
    moment = value.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if precise else moment.strftime("%Y-%m-%d %H:%M:%S")


def _when_ms(milliseconds: int | None) -> str:
    return _when(datetime.fromtimestamp(milliseconds / 1000, tz=UTC) if milliseconds else None)


def _datetime_input(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M") if value else ""


def _ago(moment: datetime | None) -> Markup:
    """`<time>` reading "3 min ago", the exact UTC time on hover (the page's script keeps it current)."""
    if moment is None:
        return Markup("-")
    now = datetime.now(UTC)
    return Markup('<time class="ago" datetime="{}" title="{}">{}</time>').format(
        iso_text(moment), exact_text(moment), relative_text(moment, now)
    )


def _elapsed(since: datetime | None) -> Markup:
    """How long since `since`, e.g. "3 min" (kept ticking by the page's script)."""
    if since is None:
        return Markup("-")
    seconds = (datetime.now(UTC) - since).total_seconds()
    return Markup('<span class="elapsed" data-since="{}" title="since {}">{}</span>').format(
        iso_text(since), exact_text(since), duration_text(seconds)
    )


TEMPLATES = template_environment("mcp_runtime.dashboard")
TEMPLATES.globals.update(ui=UI_PATH, status_style=status_style, legend=STEP_LEGEND)
TEMPLATES.filters.update(
    when=_when,
    when_ms=_when_ms,
    datetime_input=_datetime_input,
    ago=_ago,
    elapsed=_elapsed,
    exact=exact_text,
    clock=clock_text,
    duration=duration_text,
)

_STATUS_CODES: list[tuple[type[Exception], int, str]] = [
    (NotFoundError, 404, "Not found"),
    (PermissionDeniedError, 403, "Not allowed"),
    (AuthenticationRequiredError, 401, "Sign in first"),
    (InvalidFormError, 400, "Check the input"),
    (ValidationError, 400, "Check the input"),
    (ConflictError, 409, "Not possible now"),
    (StoreUnavailableError, 503, "Runtime unavailable"),
]


def page(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("user", None)
    context.setdefault("notice", None)
    context.setdefault("nav", None)
    html = TEMPLATES.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status_code=status_code)


def error_page(request: Request, tool_name: str, exc: Exception, **context: Any) -> HTMLResponse:
    """The page of a failed read or action: the tool's error text, the status of its kind."""
    status_code, heading = next(
        ((code, heading) for kind, code, heading in _STATUS_CODES if isinstance(exc, kind)), (500, "Failed")
    )
    message = tool_error_text(tool_name, exc)
    return page(
        request, "error.html.j2", status_code=status_code, heading=heading, message=message, **context
    )
