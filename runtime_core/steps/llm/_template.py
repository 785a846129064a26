"""The offline default LLM provider: a deterministic stand-in that never leaves the process.

Owns the `template` provider's reply format. Must not make network calls.
"""

from __future__ import annotations

from runtime_core.steps._results import sha256_hex
from runtime_core.steps.llm._chat import TextSink
from runtime_core.steps.llm._provider import LlmReply, LlmRequest

SUMMARY_CHARS = 160
TEMPLATE_PROVIDER = "template"
TEMPLATE_MODEL = "template-v1"


class TemplateLlmProvider:
    """A stable summary of the prompt (a conversation's last message) tagged with its sha256
    prefix; no token usage and no tool calls. Streamed word by word when asked."""

    default_model = TEMPLATE_MODEL

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmReply:
        model = request.model or self.default_model
        prompt = request.conversation()[-1].text
        digest = sha256_hex(f"{model}\n{prompt}")[:16]
        flattened = " ".join(prompt.split())
        summary = flattened if len(flattened) <= SUMMARY_CHARS else f"{flattened[:SUMMARY_CHARS]}..."
        text = f"[{model} {digest}] {summary}"
        if on_text is not None:
            for index, word in enumerate(text.split(" ")):
                await on_text(word if index == 0 else f" {word}")
        return LlmReply(text=text, model=model)
