"""The `ai.prompt` executor: render `config.template` from the inputs and call an LLM provider.

Owns template rendering: `{name}` or `{name.path}` reads the (unwrapped) input, non-string
values render as key-sorted JSON, `{{` and `}}` are literal braces. Must not talk to a
model itself: that is the provider's job (see `_llm_providers`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from runtime_core.steps._config import StepConfig, parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._llm_providers import LlmProviders
from runtime_core.steps._results import sha256_hex, step_result, unwrap_result

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


class PromptConfig(StepConfig):
    template: str
    provider: str = "template"
    model: str = "template-v1"
    params: dict[str, Any] = {}


class AiPromptExecutor:
    """`data`: the completion `text` and the rendered `prompt`."""

    step_key = "ai.prompt"
    config_model = PromptConfig
    description = "Render a prompt template from the inputs and complete it with a named LLM provider."

    def __init__(self, providers: LlmProviders) -> None:
        self._providers = providers

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(PromptConfig, invocation)
        prompt = render_template(config.template, invocation.inputs)
        provider = self._providers.resolve(config.provider)
        text = await provider.complete(prompt, config.model, dict(config.params))
        return step_result(
            {"prompt": prompt, "text": text},
            model=config.model,
            promptSha256=sha256_hex(prompt),
            provider=config.provider,
        )


def render_template(template: str, inputs: dict[str, Any]) -> str:
    """Fill `{placeholders}` from `inputs`; a placeholder with no value is a permanent failure."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)[0]
        return _format(_lookup(inputs, match.group(1)))

    return _PLACEHOLDER.sub(substitute, template)


def _lookup(inputs: dict[str, Any], path: str) -> Any:
    head, *rest = path.split(".")
    if head not in inputs:
        raise StepFailure(f"prompt template placeholder {{{path}}} has no input {head!r}", code="permanent")
    value = unwrap_result(inputs[head])
    for part in rest:
        if not isinstance(value, dict) or part not in value:
            raise StepFailure(f"prompt template placeholder {{{path}}} does not resolve", code="permanent")
        value = unwrap_result(value[part])
    return value


def _format(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
