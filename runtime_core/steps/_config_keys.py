"""The keys a step's `config` may hold, and the unknown ones (a typo) with the key meant.

Owns which keys a config model declares (each field's camelCase alias and its snake_case name,
in nested config models too), the engine's keys every step's config may carry (`retry`,
`timeoutMs`, `concurrency`, `sourceSteps` / `sourceStep`), and finding the keys of a config
that none of them is, with the closest known key as a suggestion. A model that declares
nothing (the `StepConfig` base: a step that reads its config itself) or allows extra keys
(`extra="allow"`) accepts any key. Must not validate values: the config model does.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from runtime_core.errors import closest_name
from runtime_core.policy import RetryConfig
from runtime_core.steps._config import StepConfig

ENGINE_CONFIG_KEYS = ("retry", "timeoutMs", "concurrency", "sourceSteps", "sourceStep")
"""Read by the engine from any step's config, whatever its step type."""


@dataclass(frozen=True)
class UnknownKey:
    path: str
    """Where the key is, e.g. `limits.maxTurn` (top level: the key itself)."""
    key: str
    known: tuple[str, ...]
    """The keys allowed where it is (the aliases pipelines spell)."""

    @property
    def suggestion(self) -> str | None:
        return closest_name(self.key, self.known)


def unknown_config_keys(model: type[BaseModel], config: Mapping[str, Any]) -> list[UnknownKey]:
    """Every key of `config` that `model` (or a nested config model) does not declare."""
    return list(_unknown(model, config, "", top=True))


def _unknown(
    model: type[BaseModel], config: Mapping[str, Any], prefix: str, *, top: bool
) -> Iterator[UnknownKey]:
    if not _checks_keys(model):
        return
    fields = model.model_fields
    names = {name: name for name in fields} | {f.alias: name for name, f in fields.items() if f.alias}
    spelled = tuple(dict.fromkeys(f.alias or name for name, f in fields.items()))
    known = (*spelled, *ENGINE_CONFIG_KEYS) if top else spelled
    for key, value in config.items():
        name = names.get(key)
        if name is None:
            if not (top and key in ENGINE_CONFIG_KEYS):
                yield UnknownKey(f"{prefix}{key}", key, known)
            continue
        for nested, item, where in _nested(fields[name].annotation, value, f"{prefix}{key}"):
            yield from _unknown(nested, item, f"{where}.", top=False)


def _checks_keys(model: type[BaseModel]) -> bool:
    """A model declaring no field of its own (the StepConfig base) or allowing extras takes any key."""
    return model is not StepConfig and bool(model.model_fields) and model.model_config.get("extra") != "allow"


def _nested(
    annotation: Any, value: Any, where: str
) -> Iterator[tuple[type[BaseModel], Mapping[str, Any], str]]:
    """The config models in a field's value: `Model`, `Model | None`, `list[Model]`, `dict[str, Model]`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if isinstance(value, Mapping):
            yield annotation, value, where
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            yield from _nested(arg, value, where)
    elif origin is list and args and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nested(args[0], item, f"{where}[{index}]")
    elif origin is dict and len(args) == 2 and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _nested(args[1], item, f"{where}.{key}")


def retry_section_key(key: str) -> str | None:
    """The `retry` field a misplaced top-level key names (`maxRetries` belongs in `retry`)."""
    for name, field in RetryConfig.model_fields.items():
        if key in (name, field.alias):
            return field.alias or name
    return None
