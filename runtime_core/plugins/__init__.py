"""Step plug-ins: discovering third-party steps and loading them into an executor registry.

Owns the sources (Python entry points of group `mcp_runtime.steps`, explicit `module:attr`
references from `--steps` / the server config / `MCP_RUNTIME_STEPS`), turning what they
export into step executors, refusing a step key another origin registered, and
PluginLoadError, the start-up error naming the entry point or reference that failed. Must not
define the step API (`runtime_core.steps.api`) nor run steps.
"""

from runtime_core.plugins._errors import PluginLoadError
from runtime_core.plugins._loading import describe_steps, load_step_plugins, plugin_sources, register_source
from runtime_core.plugins._settings import ENTRY_POINTS_ENV, STEPS_ENV, StepPluginSettings, split_references
from runtime_core.plugins._sources import PluginSource, entry_point_sources, reference_source

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Loading
    "load_step_plugins",
    "describe_steps",
    "register_source",
    "PluginLoadError",
    # Settings
    "StepPluginSettings",
    "split_references",
    "STEPS_ENV",
    "ENTRY_POINTS_ENV",
    # Sources
    "PluginSource",
    "plugin_sources",
    "entry_point_sources",
    "reference_source",
]
