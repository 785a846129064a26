"""Assembly of a running runtime from settings.

Owns `RuntimeSettings` (environment + defaults) and `RuntimeServices`, the async context
that starts the embedded `redis-server` when no REDIS_URL is given, connects the hot state,
and wires the DAG store, executors, retry engine and engine together (`EngineServices`,
also used by runtime-instance processes) plus the control plane (`RuntimeServices`). Must
not contain runtime behaviour of its own: it only builds and closes the parts.
"""

from runtime_core.bootstrap._services import EngineServices, RuntimeServices
from runtime_core.bootstrap._settings import RuntimeSettings, default_data_dir

__all__ = ["EngineServices", "RuntimeServices", "RuntimeSettings", "default_data_dir"]
