"""DurableStoreSettings: the one typed config object that selects and tunes a backend.

Must not open any connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SQLITE_FILE_NAME = "runtime.db"
DEFAULT_MONGODB_DATABASE = "mcp_runtime"


class DurableStoreSettings(BaseModel):
    """`sqlite` (embedded default, one file) or `mongodb` (PyMongo async)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["sqlite", "mongodb"] = "sqlite"
    sqlite_path: Path | None = None
    sqlite_busy_timeout_ms: int = Field(default=5000, ge=0)
    mongodb_uri: str | None = None
    mongodb_database: str = DEFAULT_MONGODB_DATABASE
    mongodb_timeout_ms: int = Field(default=5000, gt=0)

    @model_validator(mode="after")
    def _backend_has_its_location(self) -> DurableStoreSettings:
        if self.backend == "sqlite" and self.sqlite_path is None:
            raise ValueError("backend 'sqlite' needs sqlite_path (e.g. <data_dir>/runtime.db)")
        if self.backend == "mongodb" and not self.mongodb_uri:
            raise ValueError("backend 'mongodb' needs mongodb_uri (e.g. from MONGODB_URI)")
        return self

    @classmethod
    def embedded(cls, data_dir: Path) -> DurableStoreSettings:
        """The zero-configuration default: `<data_dir>/runtime.db`."""
        return cls(backend="sqlite", sqlite_path=data_dir / SQLITE_FILE_NAME)
