"""The `ai.prompt` executor: render `config.template` from the inputs and call an LLM provider.

Owns template rendering (`{name}` or `{name.path}` reads the (unwrapped) input, non-string
values render as key-sorted JSON, `{{` and `}}` are literal braces), validating structured
output against `config.responseSchema`, and the result: `data` holds the `prompt`, the
reply `text` and, with a schema, the parsed `output`; meta holds model, provider, prompt
hash and the token `usage` (which the engine copies into the ledger). With `stream` the
reply's text goes to the claim's live output as it arrives (the result is the same). The
model call is a guarded operation (`call`, see `runtime_core.steps.operations`): its id is
recorded before the request, so a call whose process died is found uncertain and settled by
`onUncertain` (default `retry`: a paid-for reply may be asked for again, never silently).
Must not talk to a model itself: that is the provider's job (see `runtime_core.steps.llm`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from runtime_core.policy import PROVIDER_RETRY
from runtime_core.steps._config import parse_config
from runtime_core.steps._executor import StepFailure, StepInvocation
from runtime_core.steps._prompt_config import PromptConfig, check_prompt_provider
from runtime_core.steps._results import canonical_json, sha256_hex, step_result, unwrap_result
from runtime_core.steps.llm import LlmProvider, LlmProviders, LlmReply, LlmRequest, parse_structured_output
from runtime_core.steps.operations import DECISION_INPUT_SCHEMA, Decision, guarded_call

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


class AiPromptExecutor:
    step_key = "ai.prompt"
    config_model = PromptConfig
    description = "Render a prompt template from the inputs and complete it with a named LLM provider."
    default_retry = PROVIDER_RETRY
    input_schema = DECISION_INPUT_SCHEMA  # what `onUncertain: ask` waits for

    def __init__(self, providers: LlmProviders) -> None:
        self._providers = providers

    def check_config(self, config: PromptConfig) -> None:
        """Submit-time: the provider the step names is configured here."""
        check_prompt_provider(config, self._providers)

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(PromptConfig, invocation)
        prompt = render_template(config.template, invocation.inputs)
        provider = self._providers.resolve(config.provider)
        request = LlmRequest(
            prompt=prompt,
            model=config.model,
            system=render_template(config.system, invocation.inputs) if config.system else None,
            params=dict(config.params),
            response_schema=config.response_schema,
            schema_name=config.schema_name,
            schema_strict=config.schema_strict,
        )
        reply = await guarded_call(
            invocation,
            "call",
            config.on_uncertain,
            lambda operation_id: streamed_completion(
                provider, request, invocation if config.stream else None
            ),
            from_decision=lambda decision: decided_reply(decision, config.model or provider.default_model),
            peer=f"LLM provider {config.provider!r}",
        )
        usage = reply.usage.record(config.provider, reply.model) if reply.usage else None
        data: dict[str, Any] = {"prompt": prompt, "text": reply.text}
        if config.response_schema is not None:
            what = f"the reply of LLM provider {config.provider!r}"
            data["output"] = parse_structured_output(
                reply.text, config.response_schema, what=what, usage=usage
            )
        meta: dict[str, Any] = {"usage": usage} if usage else {}
        return step_result(
            data, model=reply.model, promptSha256=sha256_hex(prompt), provider=config.provider, **meta
        )


def decided_reply(decision: Decision, model: str) -> LlmReply:
    """A human's `done` answer to an uncertain model call: its `result` is the reply's text."""
    result = decision.result
    return LlmReply(text=result if isinstance(result, str) else canonical_json(result), model=model)


async def streamed_completion(
    provider: LlmProvider, request: LlmRequest, streaming: StepInvocation | None
) -> LlmReply:
    """The provider's reply; with `streaming` (an invocation in the engine) its text goes to the
    claim's live output while it arrives, and the output is closed once the reply is complete."""
    claim = streaming.claim if streaming is not None else None
    if claim is None:
        return await provider.complete(request)
    stream = claim.output_stream()
    await stream.begin()
    reply = await provider.complete(request, stream.write)
    await stream.finish()
    return reply


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
