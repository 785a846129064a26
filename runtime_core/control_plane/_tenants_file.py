"""TenantsFile: the tenants file (`MCP_RUNTIME_TENANTS_FILE`) read and validated once.

Owns reading the file (one read, one JSON parse) and validating each section into the part
its users take: `tenants` (runtime capacity: a TenantSettingsCatalog), `webhooks` (each
tenant's endpoints and callback policy) and `rateLimits` (TenantRateLimits). Anything wrong
is one ConfigurationError naming the file, the section and what to fix. Must not decide
anything the sections configure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from runtime_core.errors import ConfigurationError, closest_name
from runtime_core.flow import TenantRateLimits
from runtime_core.instances import TenantSettingsCatalog
from runtime_core.steps import validation_problems
from runtime_core.webhooks import TenantWebhooks, WebhookDeliverySettings, WebhookSettings

_FILE_HINT = (
    'Point MCP_RUNTIME_TENANTS_FILE (or --tenants-file) at a JSON object with "tenants", '
    '"webhooks" and "rateLimits" sections (each optional).'
)
_SECTION_HINTS = {
    "tenants": 'Map each tenant id (or "default") to camelCase runtime settings such as isolationMode '
    "and maxRuntimeInstances.",
    "webhooks": "Map each tenant id to its endpoints, callbackHosts and callbackSecretEnv (docs/mcp.md).",
}
_SECTIONS = ("tenants", "webhooks", "rateLimits", "description")
_OBJECTS = TypeAdapter(dict[str, dict[str, Any]])
_WEBHOOKS = TypeAdapter(dict[str, TenantWebhooks])
PartT = TypeVar("PartT")


@dataclass(frozen=True)
class TenantsFile:
    """Each section of the tenants file as its users take it (no file: every default)."""

    catalog: TenantSettingsCatalog = field(default_factory=TenantSettingsCatalog)
    webhooks: dict[str, TenantWebhooks] = field(default_factory=dict)
    rate_limits: TenantRateLimits = field(default_factory=TenantRateLimits)

    @classmethod
    def read(cls, path: Path | None) -> TenantsFile:
        """The file at `path`, read once; ConfigurationError when it cannot be used."""
        if path is None:
            return cls()
        raw = _parsed(path)
        return cls(
            catalog=_section(path, raw, "tenants", _catalog),
            webhooks=_section(path, raw, "webhooks", _WEBHOOKS.validate_python),
            rate_limits=TenantRateLimits.from_mapping(
                raw.get("rateLimits", {}), where=f"the tenants file {path}"
            ),
        )

    def webhook_settings(self, delivery: WebhookDeliverySettings | None = None) -> WebhookSettings:
        """The webhooks section with the delivery settings (default: the environment's)."""
        return WebhookSettings(tenants=self.webhooks, delivery=delivery or WebhookDeliverySettings.from_env())


def _parsed(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigurationError(
            f"Cannot read the tenants file {path}: {error.strerror or type(error).__name__}.", hint=_FILE_HINT
        ) from None
    except ValueError as error:  # JSONDecodeError; UnicodeDecodeError
        where = (
            f" (line {error.lineno}, column {error.colno})" if isinstance(error, json.JSONDecodeError) else ""
        )
        raise ConfigurationError(
            f"The tenants file {path} is not valid JSON{where}.", hint=_FILE_HINT
        ) from None
    if not isinstance(raw, dict):
        raise ConfigurationError(f"The tenants file {path} is not a JSON object.", hint=_FILE_HINT)
    for key in raw:
        if key not in _SECTIONS:
            guess = closest_name(key, _SECTIONS)
            raise ConfigurationError(
                f"The tenants file {path} has an unknown section {key!r}"
                + (f" (did you mean {guess!r}?)." if guess else "."),
                hint=_FILE_HINT,
            )
    return raw


def _catalog(raw: object) -> TenantSettingsCatalog:
    return TenantSettingsCatalog.from_mapping(_OBJECTS.validate_python(raw))


def _section(path: Path, raw: dict[str, Any], name: str, parse: Callable[[object], PartT]) -> PartT:
    try:
        return parse(raw.get(name, {}))
    except ValidationError as error:
        raise ConfigurationError(
            f"The {name} section of the tenants file {path} is invalid: {validation_problems(error)}",
            hint=_SECTION_HINTS[name],
        ) from None
