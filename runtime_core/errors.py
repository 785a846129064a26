"""Typed runtime errors shared by every runtime_core package.

Owns the error hierarchy and its stable machine-readable codes, `closest_name` (the
"did you mean" of a misspelled key) and `error_description` (any error, safe to log). Every
error carries a message that tells the caller what to do next. Must not contain any recovery
logic.
"""

from __future__ import annotations

import difflib
import traceback
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError


class RuntimeCoreError(Exception):
    """Base of every error the runtime reports to a caller as data."""

    code: str = "runtime_error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict[str, str]:
        body = {"code": self.code, "message": self.message}
        if self.hint:
            body["hint"] = self.hint
        return body

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InvalidPipelineError(RuntimeCoreError):
    """A pipeline definition broke a validation rule; `rule` names which one."""

    code = "invalid_pipeline"

    def __init__(self, rule: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.rule = rule

    def to_dict(self) -> dict[str, str]:
        return {**super().to_dict(), "rule": self.rule}


class InvalidArgumentError(RuntimeCoreError):
    """A request argument cannot be used as given (a malformed cursor, an empty time window)."""

    code = "invalid_arguments"


class NotFoundError(RuntimeCoreError):
    """An id is unknown *to this caller* (foreign tenants get the same answer)."""

    code = "not_found"


class ConflictError(RuntimeCoreError):
    """A transition was refused because the state moved on (stale token, version, status)."""

    code = "conflict"


class FencedError(ConflictError):
    """A writer lost its right to act: a superseded or Unsafe runtime instance incarnation, or an
    ExecutionId recovery gave up. Nothing was changed; the work continues elsewhere."""

    code = "fenced"


class RunBusyError(ConflictError):
    """The run is in a transition that settles on its own (being dispatched right now); nothing
    was changed and the same request succeeds once it has settled."""


class UnreadableRecordError(RuntimeCoreError):
    """A stored record no longer reads (damaged in the store, or no longer valid under this
    release's rules): nothing is done with it; deleting it is the way out."""

    code = "record_unreadable"


class StoreUnavailableError(RuntimeCoreError):
    """Redis or the durable store cannot be reached; nothing was changed."""

    code = "store_unavailable"


class MissingSnapshotError(RuntimeCoreError):
    """Work arrived without an ExecutionContextSnapshot; it is refused, not guessed."""

    code = "missing_snapshot"


class InputTooLargeError(RuntimeCoreError):
    """An input or result is above the configured size limit."""

    code = "input_too_large"


class ConfigurationError(RuntimeCoreError):
    """A configuration file or setting is invalid; the runtime refuses to start with it."""

    code = "invalid_configuration"


def closest_name(word: str, known: Iterable[str]) -> str | None:
    """The known name `word` most likely misspells (None when none is close)."""
    matches = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def error_description(exc: BaseException) -> str:
    """`exc` described for a log without any value it carries (an input, a stored row: either
    may hold a secret): a runtime error's message (written for callers, naming no secret); a
    validation error's model, field locations and error types; otherwise the error's type.
    Errors that are not runtime errors also say where our code raised or met them."""
    if isinstance(exc, RuntimeCoreError):
        return exc.message
    if isinstance(exc, ValidationError):
        details = exc.errors(include_url=False, include_context=False, include_input=False)
        fields = "; ".join(
            f"{'.'.join(str(part) for part in detail['loc']) or '(top level)'} ({detail['type']})"
            for detail in details
        )
        described = f"ValidationError of {exc.title}: {fields}"
    else:
        described = type(exc).__qualname__
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [frame for frame in frames if "site-packages" not in frame.filename] or frames
    if ours:
        described += f" at {Path(ours[-1].filename).name}:{ours[-1].lineno} in {ours[-1].name}"
    return described
