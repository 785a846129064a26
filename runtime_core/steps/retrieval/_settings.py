"""Configured retrieval provider entries: one pydantic model per source kind, chosen by `kind`.

Owns the fields of a `retrieval` entry of the providers file (snake_case, like the server
config) and of its named operations: parameterized SQL (PostgreSQL), a templated path
with bound query / body inputs (HTTP JSON), a filter template with `{"$param": name}`
leaves (MongoDB). Each operation knows which inputs it binds. Secrets are never fields:
an entry names the environment variables holding them. Must not open connections.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from psycopg.conninfo import conninfo_to_dict
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime_core.steps._http_endpoint import HttpEndpointSettings
from runtime_core.steps.retrieval._operations import ResultShape

PARAM_MARKER = "$param"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_SQL_NAMED = re.compile(rf"%\(({_NAME})\)[sbt]")
_SQL_POSITIONAL = re.compile(r"%[sbt]")
_PATH_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SqlOperation(_Strict):
    """SQL with named placeholders `%(candidateId)s`: each is bound from the step input of that name."""

    sql: str = Field(min_length=1)
    result: ResultShape = "many"
    json_columns: tuple[str, ...] = ()
    max_rows: int = Field(default=1000, ge=1, le=100_000)

    @field_validator("sql")
    @classmethod
    def _named_placeholders_only(cls, sql: str) -> str:
        if _SQL_POSITIONAL.search(_SQL_NAMED.sub("", sql.replace("%%", ""))):
            raise ValueError("use named placeholders like %(candidateId)s (bound from the step's inputs)")
        return sql

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(_SQL_NAMED.findall(self.sql)))


class PostgresSettings(_Strict):
    """A psycopg 3 async pool. `conninfo` holds no password: it comes from `password_env`
    (or the whole conninfo from `conninfo_env`). Queries run read-only with a statement timeout."""

    kind: Literal["postgres"]
    provider_type: str = "relational"
    conninfo: str = ""
    conninfo_env: str | None = None
    password_env: str | None = None
    min_size: int = Field(default=1, ge=0)
    max_size: int = Field(default=4, ge=1)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    statement_timeout_ms: int = Field(default=10_000, ge=1)
    read_only: bool = True
    operations: dict[str, SqlOperation] = Field(min_length=1)

    @field_validator("conninfo")
    @classmethod
    def _no_password(cls, conninfo: str) -> str:
        try:
            fields = conninfo_to_dict(conninfo)
        except Exception:  # psycopg names the bad part; never echo the conninfo itself
            raise ValueError("conninfo is not a valid libpq connection string") from None
        if "password" in fields:
            raise ValueError(
                "conninfo must not hold a password: name its environment variable in password_env"
            )
        return conninfo

    @model_validator(mode="after")
    def _pool_sizes(self) -> PostgresSettings:
        if self.min_size > self.max_size:
            raise ValueError("min_size must not exceed max_size")
        return self


class HttpOperation(_Strict):
    """`path` placeholders `{name}` are URL-encoded inputs; `query` / `body` name inputs sent as such.

    The reply JSON (at `result_path`, dotted) is the result: `one` takes the first item of a
    list (none: not_found), `many` needs a list. A 404 is `not_found`.
    """

    method: Literal["GET", "POST"] = "GET"
    path: str = Field(pattern=r"^/")
    query: tuple[str, ...] = ()
    body: tuple[str, ...] = ()
    result_path: str | None = None
    result: ResultShape = "one"

    @field_validator("path")
    @classmethod
    def _placeholders_are_names(cls, path: str) -> str:
        for name in _PATH_PLACEHOLDER.findall(path):
            if not re.fullmatch(_NAME, name):
                raise ValueError(f"path placeholder {{{name}}} must be an input name")
        return path

    @model_validator(mode="after")
    def _body_needs_post(self) -> HttpOperation:
        if self.body and self.method != "POST":
            raise ValueError("body inputs need method POST")
        return self

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(_PATH_PLACEHOLDER.findall(self.path)))

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.path_params, *self.query, *self.body]))


class HttpJsonSettings(HttpEndpointSettings):
    """An HTTP JSON API; `headers_from_env` maps a header to the environment variable holding its value."""

    kind: Literal["http_json"]
    provider_type: str = "api"
    headers_from_env: dict[str, str] = {}
    operations: dict[str, HttpOperation] = Field(min_length=1)


class MongoOperation(_Strict):
    """`find` on `collection`; in `filter`, a `{"$param": "candidateId"}` value is bound from that input."""

    collection: str = Field(min_length=1)
    filter: dict[str, Any] = {}
    projection: dict[str, Any] | None = None
    sort: list[tuple[str, Literal[1, -1]]] = []
    limit: int = Field(default=100, ge=1, le=10_000)
    result: ResultShape = "many"

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(_param_names(self.filter)))


def _param_names(template: Any) -> list[str]:
    if isinstance(template, dict):
        if set(template) == {PARAM_MARKER}:
            return [str(template[PARAM_MARKER])]
        return [name for value in template.values() for name in _param_names(value)]
    if isinstance(template, list):
        return [name for value in template for name in _param_names(value)]
    return []


class MongoDbSettings(_Strict):
    """PyMongo's async client; the URI (which may hold credentials) comes from `uri_env`."""

    kind: Literal["mongodb"]
    provider_type: str = "document"
    uri_env: str = "MONGODB_URI"
    database: str = Field(min_length=1)
    server_selection_timeout_ms: int = Field(default=5_000, ge=1)
    operations: dict[str, MongoOperation] = Field(min_length=1)


RetrievalProviderSettings = Annotated[
    PostgresSettings | HttpJsonSettings | MongoDbSettings, Field(discriminator="kind")
]
