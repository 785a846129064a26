"""RuntimeSettings: one typed config object, read from the environment with defaults."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir
from pydantic import BaseModel, Field

from runtime_core.control_plane import ControlPlaneSettings
from runtime_core.dag import EngineSettings
from runtime_core.observability import ObservabilitySettings
from runtime_core.pipeline import PipelineLimits
from runtime_core.plugins import StepPluginSettings
from runtime_core.scheduling import SchedulingSettings
from runtime_core.steps import PROVIDERS_FILE_ENV, StepProviderSettings, load_provider_settings
from runtime_core.storage import DurableStoreSettings

APP_NAME = "mcp-runtime"


def default_data_dir() -> Path:
    """The per-user data directory: `$XDG_DATA_HOME/mcp-runtime`, else `~/.local/share/mcp-runtime`
    (the platform's equivalent elsewhere); never the current directory."""
    return Path(user_data_dir(APP_NAME, appauthor=False))


class RuntimeSettings(BaseModel):
    """`data_dir`: `--data-dir`, else `MCP_RUNTIME_DATA_DIR`, else `default_data_dir()`.
    `require_redis_persistence`: refuse to start on a Redis without `appendonly yes` (by
    default such a Redis only produces a warning at start). `queue_partitions`: how many
    partitions a new shared queue spreads over (`MCP_RUNTIME_QUEUE_PARTITIONS`; default 1 on a
    single Redis, 16 on a cluster); a Redis whose queue recorded a count keeps it. `durable`: the
    durable store (`MCP_RUNTIME_DURABLE_URL`, else `MONGODB_URI`), None for the data directory's
    SQLite file."""

    data_dir: Path = Field(default_factory=default_data_dir)
    redis_url: str | None = None
    require_redis_persistence: bool = False
    redis_prefix: str = "mcprt:"
    queue_partitions: int | None = Field(default=None, ge=1, le=1024)
    durable: DurableStoreSettings | None = None
    workers: int = 4
    plugins: StepPluginSettings = Field(default_factory=StepPluginSettings.from_env)
    providers_file: Path | None = None
    engine: EngineSettings = Field(default_factory=EngineSettings)
    control_plane: ControlPlaneSettings = Field(default_factory=ControlPlaneSettings.from_env)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings.from_env)
    scheduling: SchedulingSettings = Field(default_factory=SchedulingSettings.from_env)
    # The largest pipelines accepted (MCP_RUNTIME_MAX_PIPELINE_STEPS / _BYTES; applied process-wide
    # when the runtime starts: set them alike on every process).
    pipeline_limits: PipelineLimits = Field(default_factory=PipelineLimits.from_env)

    model_config = {"arbitrary_types_allowed": True}

    @classmethod
    def from_env(cls, **overrides: object) -> RuntimeSettings:
        env = {
            "data_dir": os.environ.get("MCP_RUNTIME_DATA_DIR"),
            "redis_url": os.environ.get("REDIS_URL"),
            "redis_prefix": os.environ.get("MCP_RUNTIME_REDIS_PREFIX"),
            "queue_partitions": os.environ.get("MCP_RUNTIME_QUEUE_PARTITIONS"),
            "durable": DurableStoreSettings.from_env(),
            "require_redis_persistence": os.environ.get("MCP_RUNTIME_REQUIRE_REDIS_PERSISTENCE"),
            "providers_file": os.environ.get(PROVIDERS_FILE_ENV),
        }
        values = {k: v for k, v in env.items() if v}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)

    def durable_store(self) -> DurableStoreSettings:
        """The configured durable store, else the embedded `<data_dir>/runtime.db`."""
        return self.durable or DurableStoreSettings.embedded(self.data_dir)

    def step_providers(self) -> StepProviderSettings:
        """The named LLM / retrieval provider entries (none without a providers file)."""
        if self.providers_file is None:
            return StepProviderSettings()
        return load_provider_settings(self.providers_file)
