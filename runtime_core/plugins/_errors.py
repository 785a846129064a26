"""PluginLoadError: a step plug-in that cannot be loaded stops the process from starting."""

from __future__ import annotations

from runtime_core.errors import RuntimeCoreError


class PluginLoadError(RuntimeCoreError):
    """A step plug-in failed to import, is not a step, or reuses a registered step key."""

    code = "plugin_load_failed"
