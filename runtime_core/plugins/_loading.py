"""Loading step plug-ins into an ExecutorRegistry.

Owns turning what a source exports into step executors (a step object, a step class
instantiated without arguments, a list or tuple of those, or a zero-argument factory
returning them), checking each against the step API and registering it under its source.
A step key already registered by another origin (a built-in or another plug-in) is refused:
a plug-in never silently replaces a step. Must not discover sources (`_sources` does).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable
from typing import Any

from runtime_core.plugins._errors import PluginLoadError
from runtime_core.plugins._settings import StepPluginSettings
from runtime_core.plugins._sources import PluginSource, entry_point_sources, reference_source
from runtime_core.steps import ExecutorRegistry, StepDefinitionError, default_executor_registry
from runtime_core.steps.api import StepDescription, check_step_definition

log = logging.getLogger("runtime_core.plugins")


def plugin_sources(settings: StepPluginSettings) -> list[PluginSource]:
    """Installed entry points first (unless disabled), then the explicit references in order."""
    discovered = entry_point_sources() if settings.entry_points else []
    return [*discovered, *(reference_source(reference) for reference in settings.references)]


def load_step_plugins(registry: ExecutorRegistry, settings: StepPluginSettings) -> list[str]:
    """Register every plug-in step; returns the step keys added. PluginLoadError on the first problem."""
    added: list[str] = []
    for source in plugin_sources(settings):
        keys = register_source(registry, source)
        log.info("plugins.loaded", extra={"source": source.describe, "step_keys": keys})
        added += keys
    return added


def describe_steps(settings: StepPluginSettings, step_key: str | None = None) -> list[StepDescription]:
    """The built-in and plug-in steps this process would run (just `step_key`'s when given)."""
    registry = default_executor_registry()
    load_step_plugins(registry, settings)
    return registry.describe(step_key)


def register_source(registry: ExecutorRegistry, source: PluginSource) -> list[str]:
    keys: list[str] = []
    for executor in _executors(source.load(), source):
        existing = registry.get(executor.step_key)
        if existing is not None and _origin(existing) is _origin(executor):
            continue  # the same step reached twice (an entry point and a reference to it)
        if existing is not None:
            raise PluginLoadError(
                f"Step plug-in {source.describe} declares step key '{executor.step_key}', already "
                f"registered by {registry.source(executor.step_key)}.",
                hint="Give the plug-in's step another step_key (e.g. prefixed with its package name).",
            )
        registry.register(executor, source=source.name)
        keys.append(executor.step_key)
    return keys


def _executors(exported: Any, source: PluginSource) -> list[Any]:
    if _is_factory(exported):
        exported = _called(exported, source)
    items = list(exported) if isinstance(exported, list | tuple) else [exported]
    executors = [_instantiated(item, source) for item in items]
    for executor in executors:
        try:
            check_step_definition(executor)
        except StepDefinitionError as error:
            raise PluginLoadError(
                f"Step plug-in {source.describe} exports something that is not a step: {error}",
                hint="Export a @step function, a step class or instance, or a list of them.",
            ) from None
    if not executors:
        raise PluginLoadError(f"Step plug-in {source.describe} exports no steps.", hint=source.hint)
    return executors


def _is_factory(exported: Any) -> bool:
    """A plain function (not a class, not a step object) that builds the steps."""
    return inspect.isfunction(exported) and not inspect.iscoroutinefunction(exported)


def _called(factory: Any, source: PluginSource) -> Iterable[Any]:
    try:
        return factory()  # type: ignore[no-any-return]
    except Exception as error:  # third-party construction code
        raise PluginLoadError(
            f"Step plug-in {source.describe} failed to build its steps: {type(error).__name__}: {error}",
            hint=source.hint,
        ) from error


def _instantiated(item: Any, source: PluginSource) -> Any:
    if inspect.iscoroutinefunction(item):
        raise PluginLoadError(
            f"Step plug-in {source.describe} exports the async function {item.__qualname__!r} "
            "without declaring it: decorate it with @step('vendor.action', config=...).",
            hint=source.hint,
        )
    if not inspect.isclass(item):
        return item
    try:
        return item()
    except Exception as error:  # third-party constructor
        raise PluginLoadError(
            f"Step plug-in {source.describe}: step class {item.__qualname__!r} cannot be built without "
            f"arguments ({type(error).__name__}: {error}).",
            hint="Export an instance, or a zero-argument factory function returning the steps.",
        ) from error


def _origin(executor: Any) -> Any:
    """What identifies a step's implementation: a FunctionStep's function, else its class."""
    return getattr(executor, "function", None) or type(executor)
