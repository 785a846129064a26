"""Registers a tool on the MCPServer from its spec: flat arguments from the input model.

Owns the ToolSpec (name, description, input/output models, safety hints, handler) and the
wrapper every tool runs in: the guard first (authenticate + authorize + snapshot), then the
input model, then the handler; any failure becomes an MCP tool error. Must not contain
tool behaviour.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_runtime._errors import tool_error_text
from mcp_runtime._guard import ToolGuard
from runtime_core.identity import ExecutionContextSnapshot

InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT", bound=BaseModel)


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


def register_tool(server: MCPServer, spec: ToolSpec[Any, Any], guard: ToolGuard) -> None:
    server.add_tool(
        _tool_function(spec, guard),
        name=spec.name,
        title=spec.title,
        description=spec.description,
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
        structured_output=True,
    )


def _tool_function(spec: ToolSpec[Any, Any], guard: ToolGuard) -> Callable[..., Awaitable[Any]]:
    async def call(ctx: Context, **arguments: Any) -> Any:
        try:
            snapshot = guard.admit(spec.name, ctx)
            request = spec.input_model.model_validate(arguments)
            return await spec.handler(request, ToolCall(snapshot=snapshot, ctx=ctx))
        except Exception as exc:
            raise ToolError(tool_error_text(spec.name, exc)) from exc

    parameters = _flat_parameters(spec.input_model)
    parameters.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context))
    call.__signature__ = inspect.Signature(parameters, return_annotation=spec.output_model)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": spec.output_model}
    call.__name__ = spec.name.replace(".", "_")
    return call


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
