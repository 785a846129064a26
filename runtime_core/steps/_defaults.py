"""The default executor registry: every built-in step executor wired to its default providers.

Owns only the wiring. Must not contain executor behaviour.
"""

from __future__ import annotations

from pathlib import Path

from runtime_core.steps._compose import RagComposeExecutor
from runtime_core.steps._decision import DecisionScoreExecutor
from runtime_core.steps._http_tool import HttpToolExecutor
from runtime_core.steps._human import HumanApprovalExecutor
from runtime_core.steps._merge import RagMergeExecutor
from runtime_core.steps._prompt import AiPromptExecutor
from runtime_core.steps._registry import ExecutorRegistry
from runtime_core.steps._retrieval import RagRetrievalExecutor
from runtime_core.steps._step_providers import StepProviders
from runtime_core.steps._test_steps import FlakyExecutor, NoopExecutor, WaitForFileExecutor
from runtime_core.steps.mcp_tool import McpToolExecutor


def default_executor_registry(
    data_dir: Path | None = None, *, providers: StepProviders | None = None
) -> ExecutorRegistry:
    """All built-in executors wired to `providers` (default: the offline ones; the embedded
    retrieval database then lives in `data_dir`, or a temporary directory)."""
    providers = providers or StepProviders.build(data_dir=data_dir)
    return ExecutorRegistry(
        [
            RagRetrievalExecutor(providers.retrieval),
            RagMergeExecutor(),
            RagComposeExecutor(),
            DecisionScoreExecutor(),
            AiPromptExecutor(providers.llm),
            HttpToolExecutor(),
            McpToolExecutor(providers.mcp),
            HumanApprovalExecutor(),
            NoopExecutor(),
            FlakyExecutor(),
            WaitForFileExecutor(),
        ]
    )
