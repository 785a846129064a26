"""What the engine lends the executor of one claimed step beyond its inputs: `ClaimedStep`.

Owns the protocols: the claim's token (an executor keeping sub-step state of its own fences
its Lua transitions with it), `emit` (an engine event of this step: it reaches the ledger,
the trace and the run events like the engine's own) and `output_stream` (the live partial
output of a streaming step: kept bounded in Redis while the step runs, published as run
events, dropped once the call ends). Must not implement them: the DAG engine does.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class OutputStream(Protocol):
    """One streamed output of a claimed step (a model call): `begin`, `write` pieces, `finish`."""

    async def begin(self) -> None:
        """Start a new output; what an earlier attempt left (its process died mid-stream) is
        recorded as discarded."""
        ...

    async def write(self, text: str) -> None:
        """Add text (buffered briefly: many small pieces make one write and one event)."""
        ...

    async def finish(self) -> None:
        """The call ended (its result is kept by the step): the partial output goes."""
        ...


@runtime_checkable
class ClaimedStep(Protocol):
    token: str

    async def emit(self, event: str, **attributes: Any) -> None:
        """Record an event of this step (ledger, trace, run events); never raises."""
        ...

    def output_stream(self) -> OutputStream: ...
