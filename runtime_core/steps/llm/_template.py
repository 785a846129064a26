"""The offline default LLM provider: a deterministic stand-in that never leaves the process.

Owns the `template` provider's reply format. Must not make network calls.
"""

from __future__ import annotations

from runtime_core.steps._results import sha256_hex
from runtime_core.steps.llm._provider import LlmReply, LlmRequest

SUMMARY_CHARS = 160
TEMPLATE_PROVIDER = "template"
TEMPLATE_MODEL = "template-v1"


class TemplateLlmProvider:
    """A stable summary of the prompt tagged with its sha256 prefix; no token usage."""

    default_model = TEMPLATE_MODEL

    async def complete(self, request: LlmRequest) -> LlmReply:
        model = request.model or self.default_model
        digest = sha256_hex(f"{model}\n{request.prompt}")[:16]
        flattened = " ".join(request.prompt.split())
        summary = flattened if len(flattened) <= SUMMARY_CHARS else f"{flattened[:SUMMARY_CHARS]}..."
        return LlmReply(text=f"[{model} {digest}] {summary}", model=model)
