"""The default executor registry: every built-in step executor wired to its default providers.

Owns only the wiring. Must not contain executor behaviour.
"""

from __future__ import annotations

from pathlib import Path

from runtime_core.steps._compose import RagComposeExecutor
from runtime_core.steps._decision import DecisionScoreExecutor
from runtime_core.steps._http_tool import HttpToolExecutor
from runtime_core.steps._human import HumanApprovalExecutor
from runtime_core.steps._llm_providers import LlmProviders, default_llm_providers
from runtime_core.steps._merge import RagMergeExecutor
from runtime_core.steps._prompt import AiPromptExecutor
from runtime_core.steps._registry import ExecutorRegistry
from runtime_core.steps._retrieval import RagRetrievalExecutor
from runtime_core.steps._retrieval_providers import RetrievalProviders, default_retrieval_providers
from runtime_core.steps._test_steps import FlakyExecutor, NoopExecutor, WaitForFileExecutor


def default_executor_registry(
    data_dir: Path | None = None,
    *,
    retrieval_providers: RetrievalProviders | None = None,
    llm_providers: LlmProviders | None = None,
) -> ExecutorRegistry:
    """All built-in executors; the embedded retrieval database lives in `data_dir` (or a temp dir)."""
    return ExecutorRegistry(
        [
            RagRetrievalExecutor(retrieval_providers or default_retrieval_providers(data_dir)),
            RagMergeExecutor(),
            RagComposeExecutor(),
            DecisionScoreExecutor(),
            AiPromptExecutor(llm_providers or default_llm_providers()),
            HttpToolExecutor(),
            HumanApprovalExecutor(),
            NoopExecutor(),
            FlakyExecutor(),
            WaitForFileExecutor(),
        ]
    )
