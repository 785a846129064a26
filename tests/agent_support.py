"""What the agent tests share: the example loopback LLM server (imported from examples/agents, the
same file the agent guide runs), providers pointing at it, and a scripted agent conversation."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.loopback import serving
from tests.side_effect_peer import SideEffectPeer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "agents"
KEY_ENV = "MCPRT_TEST_AGENT_LLM_KEY"
API_KEY = "sk-agent-test-key"


def example_module(name: str) -> ModuleType:
    """`examples/agents/<name>.py` as a module (the examples are scripts, not a package)."""
    qualified = f"examples_agents_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module


loopback_llm = example_module("loopback_llm")
LoopbackLlm = loopback_llm.LoopbackLlm
OPENAI_PATH = loopback_llm.OPENAI_PATH
ANTHROPIC_PATH = loopback_llm.ANTHROPIC_PATH


def llm_settings(base_url: str) -> dict[str, Any]:
    """The `llm` section of a providers file: `gpt` (OpenAI format) and `claude` (Anthropic)."""
    common = {"api_key_env": KEY_ENV, "connect_timeout_s": 2, "read_timeout_s": 30}
    return {
        "gpt": {"kind": "openai", "base_url": f"{base_url}/v1", "model": "gpt-loopback", **common},
        "claude": {"kind": "anthropic", "base_url": base_url, "model": "claude-loopback", **common},
    }


@contextlib.asynccontextmanager
async def served_model(script: list[dict[str, Any]], **options: Any) -> AsyncIterator[tuple[Any, str]]:
    """The loopback model server playing `script`, and its base URL, until the block ends."""
    model = LoopbackLlm(script, **options)
    async with serving(model.app) as base_url:
        yield model, base_url


@contextlib.asynccontextmanager
async def served_peer() -> AsyncIterator[tuple[SideEffectPeer, str]]:
    """A loopback HTTP peer counting its side effects, and its base URL, until the block ends."""
    peer = SideEffectPeer()
    async with serving(peer.app()) as base_url:
        yield peer, base_url


def write_providers(folder: Path, model_url: str, **sections: Any) -> Path:
    """A providers file naming the loopback model (`gpt`, `claude`) and any other `sections`."""
    path = folder / "providers.json"
    path.write_text(json.dumps({"llm": llm_settings(model_url), **sections}), encoding="utf-8")
    return path
