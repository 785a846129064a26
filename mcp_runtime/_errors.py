"""Failures -> the text of an MCP tool error (an `is_error` result), saying what to do next.

Owns the error result of a failed tool call, the JSON-RPC error of a failed protocol method
(`protocol_error`), and the wording of every error a tool can answer with: runtime errors
(code, message, hint; a broken pipeline also names its rule, as `pipelines.validate` does),
authentication and permission denials, invalid arguments and unexpected failures.
Must not swallow anything silently: unexpected failures are logged with their traceback.
"""

from __future__ import annotations

import logging

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, CallToolResult, TextContent
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from mcp_runtime._guard import AuthenticationRequiredError
from mcp_runtime._rbac import InsufficientScopeError, PermissionDeniedError
from runtime_core.errors import InvalidPipelineError, RuntimeCoreError, StoreUnavailableError

log = logging.getLogger("mcp_runtime.tools")


def tool_error_result(tool_name: str, exc: Exception) -> CallToolResult:
    """The `is_error` answer of a failed tool call, returned rather than raised: the SDK prefixes a
    raised error's text with "Error executing tool <name>:", and the text must start with its
    `[code]`. Logged by error type only (the text may quote the caller's input)."""
    log.info("tool.error", extra={"tool": tool_name, "error_type": type(exc).__name__})
    return CallToolResult(
        content=[TextContent(type="text", text=tool_error_text(tool_name, exc))], is_error=True
    )


def protocol_error(method: str, exc: Exception) -> MCPError:
    """A protocol method's failure (task methods, resource subscriptions) as a JSON-RPC error:
    `[code] what happened. Next: what to do.`"""
    text = tool_error_text(method, exc)
    if isinstance(exc, PermissionDeniedError | AuthenticationRequiredError):
        return MCPError(code=INVALID_REQUEST, message=text)
    if isinstance(exc, RuntimeCoreError) and not isinstance(exc, StoreUnavailableError):
        return MCPError(code=INVALID_PARAMS, message=text)
    return MCPError(code=INTERNAL_ERROR, message=text)


def tool_error_text(tool_name: str, exc: Exception) -> str:
    """One line an assistant can act on: `[code] what happened. Next: what to do.`"""
    match exc:
        case RuntimeCoreError():
            rule = f"Rule {exc.rule}: " if isinstance(exc, InvalidPipelineError) else ""
            text = f"[{exc.code}] {rule}{exc.message}"
            return f"{text} Next: {exc.hint}" if exc.hint else text
        case InsufficientScopeError():
            return (
                f"[{exc.code}] {exc}. Next: sign in again asking for scope '{exc.scope}' "
                "(the token's scopes narrow what your roles allow)."
            )
        case PermissionDeniedError():
            return (
                f"[{exc.code}] {exc}. Next: ask an administrator for a role granting "
                f"'{exc.permission}' in your tenant (rbac_policies/policy.csv)."
            )
        case AuthenticationRequiredError():
            return f"[{exc.code}] {exc}."
        case ValidationError():
            problems = validation_problems(exc)
            return f"[invalid_arguments] {problems}. Next: fix the arguments (see the tool's input schema)."
        case _:
            log.exception("tool %s failed unexpectedly", tool_name)
            return (
                f"[internal_error] {tool_name} failed unexpectedly ({type(exc).__name__}). "
                "Next: retry; if it persists, check the server log."
            )


def validation_problems(exc: ValidationError) -> str:
    """Each problem as `field: message`, without the value given (it may be a secret)."""
    return "; ".join(_describe(error) for error in exc.errors(include_input=False, include_url=False))


def _describe(error: ErrorDetails) -> str:
    where = ".".join(str(part) for part in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
