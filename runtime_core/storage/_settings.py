"""DurableStoreSettings: the one typed config object that selects and tunes a backend.

Owns reading the backend's location from a URL (`MCP_RUNTIME_DURABLE_URL`: `postgresql://`,
`mongodb://`, `sqlite:///path`) and from the environment, and keeping a password out of every
printable form (the PostgreSQL conninfo it keeps has none, the password is a SecretStr; the
MongoDB URI, which may carry one, is a SecretStr). Must not open any connection.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from runtime_core.errors import ConfigurationError

SQLITE_FILE_NAME = "runtime.db"
DEFAULT_MONGODB_DATABASE = "mcp_runtime"

DURABLE_URL_ENV = "MCP_RUNTIME_DURABLE_URL"
DURABLE_PASSWORD_ENV = "MCP_RUNTIME_DURABLE_PASSWORD"
DURABLE_POOL_SIZE_ENV = "MCP_RUNTIME_DURABLE_POOL_SIZE"
DURABLE_TIMEOUT_ENV = "MCP_RUNTIME_DURABLE_TIMEOUT_MS"
MONGODB_URI_ENV = "MONGODB_URI"
MONGODB_DATABASE_ENV = "MONGODB_DATABASE"

_POSTGRESQL_SCHEMES = ("postgresql", "postgres")
_MONGODB_SCHEMES = ("mongodb", "mongodb+srv")


class DurableStoreSettings(BaseModel):
    """`sqlite` (embedded default, one file), `postgresql` (psycopg 3 pool) or `mongodb` (PyMongo async).

    `postgresql_conninfo` is a libpq conninfo without the password (host, port, dbname, user and
    every option the URL carried: sslmode, sslrootcert, ...); `postgresql_password` is set when the
    password came from MCP_RUNTIME_DURABLE_PASSWORD or the URL (libpq reads PGPASSWORD / a
    .pgpass file by itself otherwise). `mongodb_uri` is a SecretStr: its credentials never show
    in a repr or a dump. `timeout_ms` bounds connecting, waiting for a pooled
    connection, the readiness probe and unacknowledged network writes (tcp_user_timeout).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["sqlite", "postgresql", "mongodb"] = "sqlite"
    sqlite_path: Path | None = None
    sqlite_busy_timeout_ms: int = Field(default=5000, ge=0)
    postgresql_conninfo: str | None = None
    postgresql_password: SecretStr | None = None
    postgresql_pool_min_size: int = Field(default=1, ge=1)
    postgresql_pool_max_size: int = Field(default=10, ge=1)
    postgresql_timeout_ms: int = Field(default=5000, gt=0)
    mongodb_uri: SecretStr | None = None
    mongodb_database: str = DEFAULT_MONGODB_DATABASE
    mongodb_timeout_ms: int = Field(default=5000, gt=0)

    @model_validator(mode="after")
    def _backend_has_its_location(self) -> DurableStoreSettings:
        if self.backend == "sqlite" and self.sqlite_path is None:
            raise ValueError("backend 'sqlite' needs sqlite_path (e.g. <data_dir>/runtime.db)")
        if self.backend == "mongodb" and not (self.mongodb_uri and self.mongodb_uri.get_secret_value()):
            raise ValueError("backend 'mongodb' needs mongodb_uri (e.g. from MONGODB_URI)")
        if self.backend == "postgresql" and not self.postgresql_conninfo:
            raise ValueError(
                "backend 'postgresql' needs postgresql_conninfo (e.g. from MCP_RUNTIME_DURABLE_URL)"
            )
        if self.postgresql_pool_min_size > self.postgresql_pool_max_size:
            raise ValueError("postgresql_pool_min_size must not exceed postgresql_pool_max_size")
        return self

    @classmethod
    def embedded(cls, data_dir: Path) -> DurableStoreSettings:
        """The zero-configuration default: `<data_dir>/runtime.db`."""
        return cls(backend="sqlite", sqlite_path=data_dir / SQLITE_FILE_NAME)

    @classmethod
    def from_url(cls, url: str, *, password: str | None = None, **tuning: object) -> DurableStoreSettings:
        """The backend a URL names; ConfigurationError (never echoing a password) when it names none.

        `password` (from the environment) wins over one written in a PostgreSQL URL.
        """
        scheme = url.split(":", 1)[0].lower() if ":" in url else ""
        if scheme in _POSTGRESQL_SCHEMES:
            conninfo, url_password = _split_password(url)
            chosen = password or url_password
            return cls(
                backend="postgresql",
                postgresql_conninfo=conninfo,
                postgresql_password=SecretStr(chosen) if chosen else None,
                **tuning,  # type: ignore[arg-type]
            )
        if scheme in _MONGODB_SCHEMES:
            return cls(backend="mongodb", mongodb_uri=SecretStr(url), **tuning)  # type: ignore[arg-type]
        if scheme == "sqlite":  # sqlite:////absolute/path or sqlite:///relative/path (SQLAlchemy's form)
            rest = url.split(":", 1)[1]
            path = rest.removeprefix("///") if rest.startswith("///") else ""
            if not path.strip("/"):
                raise ConfigurationError(
                    f"{DURABLE_URL_ENV}: a sqlite URL needs a file path",
                    hint="Write sqlite:////absolute/path/runtime.db, or unset it to use the data directory.",
                )
            return cls(backend="sqlite", sqlite_path=Path(path), **tuning)  # type: ignore[arg-type]
        raise ConfigurationError(
            f"{DURABLE_URL_ENV} names no known durable store (scheme {scheme or 'missing'!r})",
            hint="Use postgresql://host/db, mongodb://host or sqlite:////path/runtime.db.",
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DurableStoreSettings | None:
        """MCP_RUNTIME_DURABLE_URL (with its password and tuning variables), else MONGODB_URI;
        None when neither is set (the caller's embedded default applies)."""
        env = os.environ if environ is None else environ
        url = env.get(DURABLE_URL_ENV)
        if url:
            return cls.from_url(url, password=env.get(DURABLE_PASSWORD_ENV) or None, **_tuning(env))
        if env.get(MONGODB_URI_ENV):
            database = env.get(MONGODB_DATABASE_ENV) or DEFAULT_MONGODB_DATABASE
            return cls(
                backend="mongodb", mongodb_uri=SecretStr(env[MONGODB_URI_ENV]), mongodb_database=database
            )
        return None

    def describe(self) -> str:
        """Where the store is, safe to log: never a password."""
        if self.backend == "postgresql":
            return f"postgresql ({self.postgresql_conninfo})"
        if self.backend == "mongodb":
            return "mongodb"
        return f"sqlite ({self.sqlite_path})"


def _split_password(url: str) -> tuple[str, str | None]:
    """A libpq conninfo of the URL without its password, and that password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:  # its message names the bad part, never the password
        raise ConfigurationError(
            f"{DURABLE_URL_ENV} is not a valid PostgreSQL URL: {str(exc).strip()}",
            hint="Query parameters must be libpq connection parameters (sslmode, sslrootcert, ...).",
        ) from None
    password = params.pop("password", None)
    return make_conninfo("", **params), str(password) if password is not None else None


def _tuning(env: Mapping[str, str]) -> dict[str, int]:
    tuning: dict[str, int] = {}
    for variable, field in (
        (DURABLE_POOL_SIZE_ENV, "postgresql_pool_max_size"),
        (DURABLE_TIMEOUT_ENV, "postgresql_timeout_ms"),
    ):
        text = env.get(variable)
        if not text:
            continue
        try:
            tuning[field] = int(text)
        except ValueError:
            raise ConfigurationError(
                f"{variable} must be a whole number, not {text!r}", hint=f"Set {variable}=10, or unset it."
            ) from None
    return tuning
