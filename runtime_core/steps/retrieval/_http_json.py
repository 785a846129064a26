"""The HTTP JSON retrieval provider: named operations as GET / POST requests to one API.

Owns rendering an operation's path (each `{name}` is the URL-encoded input, so a value can
never add a path segment or a query), sending `query` inputs as bound query parameters and
`body` inputs as a JSON object, secret headers read from the environment, and picking the
result out of the reply (`result_path`, `one` / `many`). HTTP failures are classified by
`_http_endpoint` (404 is `not_found`). Must not log or return a secret.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from runtime_core.steps._executor import StepFailure
from runtime_core.steps._http_endpoint import HttpEndpoint, secret_from_env
from runtime_core.steps.retrieval._operations import bound_values, operation_spec, shaped
from runtime_core.steps.retrieval._settings import HttpJsonSettings, HttpOperation

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DOT_SEGMENTS = frozenset({".", ".."})


class HttpJsonRetrievalProvider:
    def __init__(self, name: str, settings: HttpJsonSettings) -> None:
        self.name = name
        self.settings = settings
        self.operations = tuple(sorted(settings.operations))
        self._endpoint = HttpEndpoint(settings, _credentials(name, settings.headers_from_env))

    async def retrieve(self, operation: str, params: dict[str, Any]) -> dict[str, Any] | list[Any]:
        spec = operation_spec(f"HTTP provider {self.name!r}", self.settings.operations, operation)
        values = bound_values(operation, spec.params, params)
        arguments: dict[str, Any] = {}
        if spec.query:
            arguments["params"] = {name: values[name] for name in spec.query}
        if spec.method == "POST":
            arguments["json"] = {name: values[name] for name in spec.body}
        response = await self._endpoint.request(
            spec.method,
            _rendered_path(operation, spec.path, values),
            secret_headers=self._secret_headers(),
            not_found_code="not_found",
            **arguments,
        )
        try:
            reply = response.json()
        except ValueError:
            raise StepFailure(
                f"HTTP provider {self.name!r}, operation {operation!r}: the reply is not JSON",
                code="transient",
            ) from None
        return _result(operation, _at_path(operation, reply, spec.result_path), spec, values)

    def _secret_headers(self) -> dict[str, str]:
        return {
            header: secret_from_env(variable, f"header {header} of HTTP provider {self.name!r}")
            for header, variable in self.settings.headers_from_env.items()
        }

    async def aclose(self) -> None:
        await self._endpoint.aclose()


def _credentials(name: str, headers_from_env: dict[str, str]) -> str:
    """What a 401 / 403 refused: the entry's secret headers and the variables they come from."""
    if not headers_from_env:
        return f"retrieval entry '{name}', which sends no credentials (it has no headers_from_env)"
    sent = ", ".join(f"{header} from {variable}" for header, variable in sorted(headers_from_env.items()))
    return f"the headers of retrieval entry '{name}' ({sent}, its headers_from_env)"


def _rendered_path(operation: str, template: str, values: dict[str, Any]) -> str:
    def substitute(match: re.Match[str]) -> str:
        value = values[match.group(1)]
        text = _segment_text(value)
        if text is None:
            raise StepFailure(
                f"operation {operation!r}: input {match.group(1)!r} cannot fill a path segment ({value!r})",
                code="permanent",
            )
        return quote(text, safe="")

    return _PLACEHOLDER.sub(substitute, template)


def _segment_text(value: Any) -> str | None:
    """The text of one path segment; None for a list, null, empty text or a dot segment."""
    if value is None or isinstance(value, list):
        return None
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return None if not text or text in _DOT_SEGMENTS else text


def _at_path(operation: str, reply: Any, path: str | None) -> Any:
    value = reply
    for part in path.split(".") if path else ():
        if not isinstance(value, dict) or part not in value:
            raise StepFailure(f"operation {operation!r}: the reply has no {path!r}", code="permanent")
        value = value[part]
    return value


def _result(operation: str, value: Any, spec: HttpOperation, values: dict[str, Any]) -> Any:
    if isinstance(value, list):
        return shaped(operation, value, spec.result, values)
    if spec.result == "many":
        raise StepFailure(f"operation {operation!r}: the reply is not a list", code="permanent")
    return value
