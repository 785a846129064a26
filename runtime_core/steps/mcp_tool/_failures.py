"""What an MCP tool call's outcome means for the step: a result, or a typed failure.

Owns the mapping the retry engine and the operation journal rely on: an `isError` result is a
failure the server answered (`permanent`, or `transient` when the result says `retryable`);
a JSON-RPC error answered by the server is `permanent` for bad requests (invalid params,
unknown method or tool) and `transient` for server errors; no session (connection refused,
the server did not start) is `transient` and nothing was sent; a call that timed out or whose
connection closed mid-call may have taken effect (`OutcomeUnknown`: `timeout` / `transient`).
Every message names the server and the tool, never a secret. Must not call anything.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, REQUEST_TIMEOUT

from runtime_core.steps._executor import StepFailure
from runtime_core.steps.operations import OutcomeUnknown

RETRYABLE_FIELD = "retryable"
_BAD_REQUEST = frozenset({INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND})
_TEXT_CHARS = 300


def result_data(result: CallToolResult) -> Any:
    """The step's data: the tool's `structuredContent`, else its text content."""
    if result.structured_content is not None:
        return result.structured_content
    return {"text": _text(result)}


def tool_error(what: str, result: CallToolResult) -> StepFailure:
    """The failure an `isError` result means (the server answered: nothing in doubt)."""
    structured = result.structured_content if isinstance(result.structured_content, dict) else {}
    retryable = structured.get(RETRYABLE_FIELD) is True
    return StepFailure(
        f"{what} answered isError: {_text(result)}", code="transient" if retryable else "permanent"
    )


def call_error(what: str, error: BaseException) -> StepFailure | OutcomeUnknown:
    """A call that raised: StepFailure when the server answered or nothing was sent, else OutcomeUnknown."""
    if isinstance(error, MCPError):
        if error.code == REQUEST_TIMEOUT:
            return OutcomeUnknown(StepFailure(f"{what} timed out: {error.error.message}", code="timeout"))
        if error.code == CONNECTION_CLOSED:
            return OutcomeUnknown(StepFailure(f"{what} lost its connection: {error.error.message}"))
        code = "permanent" if error.code in _BAD_REQUEST else "transient"
        return StepFailure(f"{what} answered error {error.code}: {error.error.message}", code=code)
    if isinstance(error, TimeoutError):
        return OutcomeUnknown(StepFailure(f"{what} timed out", code="timeout"))
    return OutcomeUnknown(StepFailure(f"{what} failed: {_describe(error)}"))


def unreachable(server: str, error: BaseException) -> StepFailure:
    """No session could be opened: nothing was sent."""
    if isinstance(error, StepFailure):
        return error  # a variable the entry names is unset
    return StepFailure(f"MCP server {server!r} is unreachable: {_describe(error)}", code="transient")


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__} {error}".strip()


def _text(result: CallToolResult) -> str:
    text = " ".join(block.text for block in result.content if isinstance(block, TextContent))
    return text[:_TEXT_CHARS]
