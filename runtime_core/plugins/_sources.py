"""Where step plug-ins come from: installed entry points and explicit `module:attr` references.

Owns finding them (entry points of group `mcp_runtime.steps`, sorted by name; references as
given) and naming each for messages: an entry point by its name, value and distribution, a
reference as written. Loading a source imports its module and reads the attribute; any error
doing so is a PluginLoadError naming the source. Must not register steps.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from runtime_core.plugins._errors import PluginLoadError
from runtime_core.steps.api import STEP_ENTRY_POINT_GROUP

_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class PluginSource:
    """One place step plug-ins are loaded from: `name` is how registries show it (a step's source),
    `describe` how messages name it in full."""

    name: str
    describe: str
    hint: str
    _load: Callable[[], Any]

    def load(self) -> Any:
        try:
            return self._load()
        except Exception as error:  # an import-time failure of third-party code, reported as data
            raise PluginLoadError(
                f"Step plug-in {self.describe} failed to load: {type(error).__name__}: {error}",
                hint=self.hint,
            ) from error


def entry_point_sources(group: str = STEP_ENTRY_POINT_GROUP) -> list[PluginSource]:
    """Every installed entry point of `group`, sorted by name."""
    return [_entry_point_source(point) for point in sorted(entry_points(group=group), key=lambda p: p.name)]


def _entry_point_source(point: EntryPoint) -> PluginSource:
    dist = f"{point.dist.name} {point.dist.version}" if point.dist is not None else "unknown distribution"
    name = f"entry point '{point.name}' ({dist})"
    describe = f"entry point '{point.name} = {point.value}' (group {point.group}, distribution {dist})"
    uninstall = f"`pip uninstall {point.dist.name}`" if point.dist is not None else "uninstall it"
    return PluginSource(name, describe, f"Fix the plug-in package, or {uninstall}.", point.load)


def reference_source(reference: str) -> PluginSource:
    """`package.module:attribute` as given to `--steps` / the `steps` setting."""
    describe = f"reference '{reference}'"
    hint = "Give step plug-ins as importable `package.module:attribute` references (--steps / 'steps')."
    if not _REFERENCE.match(reference):
        raise PluginLoadError(
            f"Step plug-in {describe} is not of the form 'package.module:attribute'.", hint=hint
        )
    return PluginSource(describe, describe, hint, lambda: _resolve(reference))


def _resolve(reference: str) -> Any:
    module_name, _, attribute = reference.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value
