"""The providers file and the provider registries one process builds from it.

Owns `StepProviderSettings` (the JSON file: named `llm` and `retrieval` entries, each tenant's
`mcp_servers`, secrets only as environment-variable names), loading it with errors that name
the file and the field (never a value), and `StepProviders`: the LLM and retrieval registries
and the MCP servers built from it, closed together. Must not read secrets: providers read
their environment variables on use.
"""

from __future__ import annotations

import logging
import os
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from runtime_core.errors import ConfigurationError
from runtime_core.flow import ProviderRateLimit, ProviderRateLimits
from runtime_core.steps.llm import TEMPLATE_PROVIDER, LlmProviders, LlmProviderSettings, build_llm_providers
from runtime_core.steps.mcp_tool import (
    McpHttpServer,
    McpServers,
    McpStdioServer,
    OAuthClientCredentials,
    TenantMcpServers,
    secret_variables,
)
from runtime_core.steps.retrieval import (
    EMBEDDED_RELATIONAL_KEYS,
    RetrievalProviders,
    RetrievalProviderSettings,
    build_retrieval_providers,
)

PROVIDERS_FILE_ENV = "MCP_RUNTIME_PROVIDERS_FILE"
log = logging.getLogger("runtime_core.steps.providers")


class StepProviderSettings(BaseModel):
    """`{"llm": {name: entry}, "retrieval": {name: entry}, "rate_limits": {budget: limit},
    "mcp_servers": {tenant: {name: entry}}}`; each llm / retrieval entry is chosen by its `kind`,
    each MCP server by its `transport`; a rate limit is one provider key's budget, shared by the
    entries it lists (`providers`), see docs/flow-control.md; MCP servers: docs/mcp-tools-as-steps.md."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm: dict[str, LlmProviderSettings] = {}
    retrieval: dict[str, RetrievalProviderSettings] = {}
    rate_limits: dict[str, ProviderRateLimit] = {}
    mcp_servers: dict[str, TenantMcpServers] = {}

    @model_validator(mode="after")
    def _budgets_name_providers(self) -> StepProviderSettings:
        known = {*self.llm, *self.retrieval, TEMPLATE_PROVIDER, *EMBEDDED_RELATIONAL_KEYS}
        unknown = sorted(self.provider_rate_limits.providers() - known)
        if unknown:
            raise ValueError(f"rate_limits name providers that are not configured: {', '.join(unknown)}")
        return self

    @property
    def provider_rate_limits(self) -> ProviderRateLimits:
        return ProviderRateLimits(budgets=self.rate_limits)

    @field_validator("llm")
    @classmethod
    def _template_is_built_in(cls, llm: dict[str, LlmProviderSettings]) -> dict[str, LlmProviderSettings]:
        if TEMPLATE_PROVIDER in llm:
            raise ValueError(f"'{TEMPLATE_PROVIDER}' is the built-in offline provider: choose another name")
        return llm


def load_provider_settings(path: Path) -> StepProviderSettings:
    """Read the providers file; a missing or invalid file is a ConfigurationError naming the problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigurationError(
            f"Cannot read the providers file {path}: {error.strerror}.",
            hint=f"Fix the path given by --providers-file / {PROVIDERS_FILE_ENV}.",
        ) from None
    try:
        return StepProviderSettings.model_validate_json(text)
    except ValidationError as error:
        raise ConfigurationError(
            f"The providers file {path} is invalid: {'; '.join(_problem(issue) for issue in error.errors())}",
            hint="See docs/providers.md, 'Configuring an OpenAI-compatible or Anthropic provider'.",
        ) from None


def _entry_models() -> list[type[BaseModel]]:
    return [
        *(
            member
            for union in (LlmProviderSettings, RetrievalProviderSettings)
            for member in typing.get_args(typing.get_args(union)[0])
        ),
        McpHttpServer,
        McpStdioServer,
        OAuthClientCredentials,
    ]


ENV_FIELDS = frozenset(
    name for model in _entry_models() for name in model.model_fields if name.endswith("_env")
)


def _problem(issue: Any) -> str:
    """`llm.openai.base_url: message`: the entry's path without the `kind` tag pydantic inserts, and
    for a secret written into the file, where it belongs instead. Never the value."""
    loc = [str(part) for part in issue["loc"]]
    if len(loc) >= 4 and loc[0] in ("llm", "retrieval"):
        del loc[2]  # the discriminator: llm.<name>.<kind>.<field>
    elif len(loc) >= 5 and loc[0] == "mcp_servers":
        del loc[3]  # the discriminator: mcp_servers.<tenant>.<name>.<transport>.<field>
    where = ".".join(loc) or "(root)"
    field = loc[-1] if loc else ""
    if issue["type"] == "extra_forbidden" and f"{field}_env" in ENV_FIELDS:
        return (
            f"{where}: secrets never go in the providers file; put the value in an environment variable "
            f'and name that variable with `{field}_env` (e.g. "{field}_env": "{field.upper()}")'
        )
    return f"{where}: {issue['msg']}"


def named_environment_variables(settings: StepProviderSettings) -> list[tuple[str, str, str]]:
    """(`<section>.<entry>`, VARIABLE, field) for every environment variable an entry names: the
    variables holding the providers' secrets. Names only, never values."""
    named = []
    for section, entries in (("llm", settings.llm), ("retrieval", settings.retrieval)):
        for name, entry in entries.items():
            for field in sorted(type(entry).model_fields):
                named += [
                    (f"{section}.{name}", variable, field)
                    for variable in _named_variables(getattr(entry, field), field)
                ]
    for tenant, servers in sorted(settings.mcp_servers.items()):
        for name, server in sorted(servers.items()):
            where = f"mcp_servers.{tenant}.{name}"
            named += [(where, variable, field) for field, variable in secret_variables(server)]
    return named


def unset_environment_variables(settings: StepProviderSettings) -> list[str]:
    """`<section>.<entry>: <VARIABLE> (<field>)` for every variable an entry names that is not set
    (the entry fails when used: better said at start). Names only, never values."""
    return [
        f"{where}: {variable} ({field})"
        for where, variable, field in named_environment_variables(settings)
        if not os.environ.get(variable)
    ]


def _named_variables(value: Any, field: str) -> list[str]:
    if field == "headers_from_env":
        return [v for v in value.values() if isinstance(v, str) and v]
    return [value] if field in ENV_FIELDS and isinstance(value, str) and value else []


class StepProviders:
    """The LLM and retrieval providers and the tenants' MCP servers of one process; `aclose()`
    releases their connections."""

    def __init__(
        self, llm: LlmProviders, retrieval: RetrievalProviders, mcp: McpServers | None = None
    ) -> None:
        self.llm = llm
        self.retrieval = retrieval
        self.mcp = mcp or McpServers()

    @classmethod
    def build(
        cls, settings: StepProviderSettings | None = None, data_dir: Path | None = None
    ) -> StepProviders:
        """The offline defaults plus every configured entry; the embedded database lives in `data_dir`."""
        settings = settings or StepProviderSettings()
        for missing in unset_environment_variables(settings):
            log.warning(
                "providers.env_missing %s is not set: steps using this provider will fail until it is",
                missing,
                extra={"provider_variable": missing},
            )
        return cls(
            build_llm_providers(settings.llm),
            build_retrieval_providers(settings.retrieval, data_dir),
            McpServers(settings.mcp_servers),
        )

    async def aclose(self) -> None:
        await self.llm.aclose()
        await self.retrieval.aclose()
        await self.mcp.aclose()
