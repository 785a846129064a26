"""What the agent tests share: the example loopback LLM server (imported from examples/agents, the
same file the agent guide runs), providers pointing at it, and a scripted agent conversation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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
