"""Builds the SDK tool of a spec: the published schema of its input model, its guarded wrapper.

Owns the ToolSpec (name, description, input/output models, safety hints, handler) and the
wrapper every tool runs in: the guard first (authenticate + authorize + snapshot), then the
input model, then the handler; any failure becomes an MCP tool error (an `is_error` result,
see `tool_error_result`). The SDK publishes the input model's schema but passes every
argument through unchecked, so a wrong type, a missing or an unknown argument is refused by
the input model, after the guard, as `[invalid_arguments]`. Must not contain tool behaviour.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_runtime._errors import tool_error_result
from mcp_runtime._guard import ToolGuard
from runtime_core.identity import ExecutionContextSnapshot

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)
ToolFunction = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class ToolCall:
    """What a handler gets besides its input: the caller's snapshot and the MCP context."""

    snapshot: ExecutionContextSnapshot
    ctx: Context


@dataclass(frozen=True)
class ToolSpec(Generic[InputT, OutputT]):
    name: str
    title: str
    description: str
    input_model: type[InputT]
    output_model: type[OutputT]
    handler: Callable[[InputT, ToolCall], Awaitable[OutputT]]
    read_only: bool
    destructive: bool = False
    idempotent: bool = False


def build_tool(spec: ToolSpec[Any, Any], guard: ToolGuard) -> Tool:
    """The SDK tool: accepts any arguments, publishes the input model's flat schema."""
    published = Tool.from_function(
        _signed(_schema_only, spec, _flat_parameters(spec.input_model)), **_options(spec)
    )
    accepting = Tool.from_function(
        _signed(_tool_function(spec, guard), spec, _open_parameters(spec.input_model)), **_options(spec)
    )
    return accepting.model_copy(update={"parameters": published.parameters})


def _options(spec: ToolSpec[Any, Any]) -> dict[str, Any]:
    return {
        "name": spec.name,
        "title": spec.title,
        "description": spec.description,
        "annotations": ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
        "structured_output": True,
    }


def _tool_function(spec: ToolSpec[Any, Any], guard: ToolGuard) -> ToolFunction:
    async def call(ctx: Context, **arguments: Any) -> Any:
        try:
            snapshot = guard.admit(spec.name, ctx)
            request = spec.input_model.model_validate(_sent_arguments(ctx, arguments))
            return await spec.handler(request, ToolCall(snapshot=snapshot, ctx=ctx))
        except Exception as exc:
            return tool_error_result(spec.name, exc)

    return call


async def _schema_only(**arguments: Any) -> Any:
    """Carries the published signature; the SDK derives the input schema from it, never calls it."""
    raise NotImplementedError


def _sent_arguments(ctx: Context, parsed: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments the caller sent (unknown names included), as the SDK pre-parsed them."""
    params = ctx.request_context.params or {}
    raw = params.get("arguments") or {}
    return {name: parsed.get(name, value) for name, value in raw.items()}


def _signed(fn: ToolFunction, spec: ToolSpec[Any, Any], parameters: list[inspect.Parameter]) -> ToolFunction:
    async def tool(**arguments: Any) -> Any:
        return await fn(**arguments)

    parameters = [*parameters, inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    tool.__signature__ = inspect.Signature(parameters, return_annotation=spec.output_model)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": spec.output_model}
    tool.__name__ = spec.name.replace(".", "_")
    return tool


def _flat_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """One keyword argument per model field, keeping its type, constraints and description."""
    parameters = []
    for name, field in model.model_fields.items():
        if field.default_factory is not None:
            raise TypeError(f"{model.__name__}.{name}: tool inputs take plain defaults, not factories")
        annotation = Annotated[(field.annotation, *field.metadata, Field(description=field.description))]
        default = inspect.Parameter.empty if field.is_required() else field.default
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        )
    return parameters


def _open_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """The same names, each accepting anything (absent = None): the input model checks them."""
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Any, default=None)
        for name in model.model_fields
    ]
