"""An example step plug-in for mcp-runtime: one function step and one class step.

`example.slugify` (an async function declared with `@step`) turns the text of one input into
a URL slug; `example.word_stats` (a class) counts the words of one input. Both declare a
pydantic config model, so `submit` refuses a pipeline whose step config does not fit it and
`mcp-runtime steps` / the `steps.list` tool publish its JSON Schema. The entry points in
pyproject.toml register them with every runtime process of the environment they are
installed in. Both are deterministic: the result depends on the invocation alone.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Any

from pydantic import Field

from runtime_core.steps.api import (
    StepConfig,
    StepFailure,
    StepInvocation,
    parse_config,
    step,
    step_result,
    unwrap_result,
)


def _text_input(invocation: StepInvocation, name: str) -> str:
    """The (unwrapped) input `name`; a missing or non-text input is a permanent failure."""
    value = unwrap_result(invocation.inputs.get(name))
    if not isinstance(value, str):
        raise StepFailure(
            f"step {invocation.step_name!r} needs a text input {name!r} (got {type(value).__name__}); "
            f'bind it, e.g. "input": {{"{name}": "state.{name}"}}',
            code="permanent",
        )
    return value


class SlugifyConfig(StepConfig):
    text_input: str = Field(min_length=1, description="Name of the input holding the text.")
    separator: str = Field(default="-", min_length=1, max_length=3)
    max_length: int = Field(default=64, ge=1, le=256, description="Longest slug kept, in characters.")


@step("example.slugify", config=SlugifyConfig)
async def slugify(config: SlugifyConfig, invocation: StepInvocation) -> dict[str, Any]:
    """Turn the text of one input into a lowercase ASCII URL slug."""
    text = unicodedata.normalize("NFKD", _text_input(invocation, config.text_input))
    words = re.findall(r"[a-z0-9]+", text.encode("ascii", "ignore").decode("ascii").lower())
    slug = config.separator.join(words)[: config.max_length].strip(config.separator)
    return step_result({"slug": slug}, words=len(words))


class WordStatsConfig(StepConfig):
    text_input: str = Field(min_length=1, description="Name of the input holding the text.")
    min_word_length: int = Field(default=1, ge=1, description="Shorter words are not counted.")
    top: int = Field(default=3, ge=0, le=50, description="How many of the most frequent words to list.")


class WordStats:
    """Counts the words of one input: total, distinct and the most frequent ones (ties by word)."""

    step_key = "example.word_stats"
    config_model = WordStatsConfig
    description = "Count the words of one input: total, distinct and the most frequent ones."

    async def execute(self, invocation: StepInvocation) -> dict[str, Any]:
        config = parse_config(WordStatsConfig, invocation)
        words = [
            word
            for word in re.findall(r"\w+", _text_input(invocation, config.text_input).lower())
            if len(word) >= config.min_word_length
        ]
        counts = Counter(words)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: config.top]
        top = [{"word": word, "count": count} for word, count in ranked]
        return step_result({"total": len(words), "distinct": len(counts), "top": top})
