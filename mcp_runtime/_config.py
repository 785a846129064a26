"""The MCP server's configuration file: principals, token hashes, trusted OAuth issuers, RBAC,
catalog and providers paths, step plug-ins, the `/metrics` token.

Owns the JSON format, its loading (relative paths resolve against the file's folder) and
the embedded default (one local admin principal in tenant `default`, no tokens). Must not
store or accept plain-text tokens: only their sha256 hex digests (secrets of OAuth clients
are named by environment variable).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mcp_runtime.auth import OAuthSettings, Principal, PrincipalConfig
from runtime_core.package_data import shipped_folder

# Shipped with the package (repository folders in a checkout, package data once installed).
RBAC_POLICIES_DIR = shipped_folder("rbac_policies", "mcp_runtime.rbac_policies")
DEFAULT_RBAC_MODEL = RBAC_POLICIES_DIR / "model.conf"
DEFAULT_RBAC_POLICY = RBAC_POLICIES_DIR / "policy.csv"
DEFAULT_PIPELINES_DIR = shipped_folder("examples/pipelines", "mcp_runtime.pipelines")
LOCAL_ADMIN = "local-admin"


class ServerConfig(BaseModel):
    """Everything the MCP server needs besides runtime settings (which come from the environment)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = ""
    principals: dict[str, PrincipalConfig]
    stdio_principal: str | None = None
    rbac_model: Path = DEFAULT_RBAC_MODEL
    rbac_policy: Path = DEFAULT_RBAC_POLICY
    pipelines_dir: Path = DEFAULT_PIPELINES_DIR
    steps: tuple[str, ...] = Field(
        (), description="step plug-in `module:attr` references loaded besides installed entry points"
    )
    providers_file: Path | None = Field(
        None, description="LLM / retrieval providers JSON (named entries; API keys only as env var names)"
    )
    oauth: OAuthSettings | None = Field(
        None, description="this HTTP server as an OAuth 2.1 resource server trusting these issuers"
    )
    metrics_token_sha256: tuple[str, ...] = Field(
        (), description="when set, GET /metrics needs a bearer token with one of these sha256 digests"
    )

    @field_validator("metrics_token_sha256")
    @classmethod
    def _metrics_digests_only(cls, digests: tuple[str, ...]) -> tuple[str, ...]:
        return PrincipalConfig.digests_only(digests)

    @model_validator(mode="after")
    def _stdio_principal_exists(self) -> ServerConfig:
        if self.stdio_principal is not None and self.stdio_principal not in self.principals:
            raise ValueError(
                f"stdio_principal '{self.stdio_principal}' is not one of the configured principals"
            )
        return self

    def principal(self, name: str) -> Principal:
        try:
            return self.principals[name].to_principal(name)
        except KeyError:
            known = ", ".join(sorted(self.principals)) or "none"
            raise ValueError(f"No principal named '{name}' in the configuration (known: {known}).") from None


def default_server_config() -> ServerConfig:
    """The embedded default: a local admin in tenant `default`, usable over stdio only."""
    admin = PrincipalConfig(user_id="local", tenant_id="default", roles=("admin",))
    return ServerConfig(principals={LOCAL_ADMIN: admin}, stdio_principal=LOCAL_ADMIN)


def load_server_config(path: Path) -> ServerConfig:
    """Read a JSON configuration file; relative paths inside it resolve against its folder."""
    raw = ServerConfig.model_validate_json(Path(path).read_text(encoding="utf-8"))
    base = Path(path).resolve().parent
    return raw.model_copy(
        update={
            "rbac_model": base / raw.rbac_model,
            "rbac_policy": base / raw.rbac_policy,
            "pipelines_dir": base / raw.pipelines_dir,
            "providers_file": base / raw.providers_file if raw.providers_file else None,
            "oauth": raw.oauth.model_copy(update={"scopes_file": base / raw.oauth.scopes_file})
            if raw.oauth
            else None,
        }
    )
