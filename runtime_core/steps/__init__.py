"""Built-in step executors, the executor registry, and the retrieval / LLM providers they call.

Owns what one step does once it has been claimed: read its resolved inputs and config,
return a `{"data": ..., **meta}` result, or raise StepFailure / StepParked; the public step
API every step (built-in or plug-in) is written with (`runtime_core.steps.api`); and the
submit-time check of each step's config against its step's config model and of the
providers it names. Providers live in the `llm` and `retrieval` sub-packages, configured by
name in the providers file; the `mcp_tool` sub-package calls tenants' MCP servers and
`operations` keeps side effects from repeating after a crash. Must not coordinate:
claiming, retries, parking and persistence belong to the DAG engine; plug-in discovery
belongs to `runtime_core.plugins`.
"""

from runtime_core.steps._claimed import ClaimedStep, OutputStream
from runtime_core.steps._compose import ComposeConfig, RagComposeExecutor
from runtime_core.steps._config import StepConfig, StepConfigError, parse_config, validation_problems
from runtime_core.steps._config_checks import (
    PROVIDER_RULE,
    STEP_CONFIG_RULE,
    TENANT_RULE,
    check_step_config,
    check_step_configs,
    check_steps_for_tenant,
)
from runtime_core.steps._decision import DecisionScoreExecutor, ScoreConfig
from runtime_core.steps._defaults import default_executor_registry
from runtime_core.steps._executor import StepExecutor, StepFailure, StepInvocation, StepParked
from runtime_core.steps._http_failures import redact, retry_after_ms
from runtime_core.steps._http_tool import HttpToolConfig, HttpToolExecutor
from runtime_core.steps._human import ApprovalConfig, HumanApprovalExecutor
from runtime_core.steps._merge import MergeConfig, RagMergeExecutor
from runtime_core.steps._prompt import AiPromptExecutor, decided_reply, render_template, streamed_completion
from runtime_core.steps._prompt_config import PromptConfig, check_prompt_provider, model_call_policy
from runtime_core.steps._registry import ANY_INPUT_SCHEMA, ExecutorRegistry
from runtime_core.steps._results import (
    canonical,
    canonical_json,
    result_usage,
    step_result,
    unwrap_result,
    usage_attributes,
)
from runtime_core.steps._retrieval import RagRetrievalExecutor
from runtime_core.steps._retrieval_config import RetrievalConfig, check_retrieval_provider
from runtime_core.steps._step_providers import (
    PROVIDERS_FILE_ENV,
    StepProviders,
    StepProviderSettings,
    load_provider_settings,
    named_environment_variables,
    unset_environment_variables,
)
from runtime_core.steps._test_steps import (
    FlakyConfig,
    FlakyExecutor,
    NoopExecutor,
    WaitForFileConfig,
    WaitForFileExecutor,
)
from runtime_core.steps.api import (
    BUILTIN_SOURCE,
    STEP_ENTRY_POINT_GROUP,
    FunctionStep,
    StepDefinitionError,
    StepDescription,
    step,
)
from runtime_core.steps.llm import LlmProvider, LlmProviders, TemplateLlmProvider
from runtime_core.steps.mcp_tool import McpServers, McpToolExecutor
from runtime_core.steps.retrieval import (
    EMBEDDED_RELATIONAL_KEYS,
    SEED_SQL_PATH,
    RetrievalProvider,
    RetrievalProviders,
    SqliteRelationalProvider,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Executor contract and registry
    "StepExecutor",
    "StepInvocation",
    "StepFailure",
    "StepParked",
    "ClaimedStep",
    "OutputStream",
    "ExecutorRegistry",
    "ANY_INPUT_SCHEMA",
    "default_executor_registry",
    # The public step API (all of it in runtime_core.steps.api)
    "step",
    "FunctionStep",
    "StepDefinitionError",
    "StepDescription",
    "STEP_ENTRY_POINT_GROUP",
    "BUILTIN_SOURCE",
    # Step config and results
    "StepConfig",
    "StepConfigError",
    "parse_config",
    "validation_problems",
    "check_step_configs",
    "check_step_config",
    "check_steps_for_tenant",
    "STEP_CONFIG_RULE",
    "PROVIDER_RULE",
    "TENANT_RULE",
    "canonical",
    "canonical_json",
    "step_result",
    "unwrap_result",
    "result_usage",
    "usage_attributes",
    # Provider configuration (the providers file)
    "StepProviderSettings",
    "StepProviders",
    "unset_environment_variables",
    "named_environment_variables",
    "load_provider_settings",
    "PROVIDERS_FILE_ENV",
    # HTTP failure mapping shared by HTTP-backed steps and providers
    "retry_after_ms",
    "redact",
    # RAG executors
    "RagRetrievalExecutor",
    "RetrievalConfig",
    "check_retrieval_provider",
    "RagMergeExecutor",
    "MergeConfig",
    "RagComposeExecutor",
    "ComposeConfig",
    # Retrieval providers (more in runtime_core.steps.retrieval)
    "RetrievalProvider",
    "RetrievalProviders",
    "SqliteRelationalProvider",
    "EMBEDDED_RELATIONAL_KEYS",
    "SEED_SQL_PATH",
    # Prompt executor and LLM providers (more in runtime_core.steps.llm)
    "AiPromptExecutor",
    "PromptConfig",
    "check_prompt_provider",
    "model_call_policy",
    "decided_reply",
    "render_template",
    "streamed_completion",
    "LlmProvider",
    "LlmProviders",
    "TemplateLlmProvider",
    # Decision, tool and human executors
    "DecisionScoreExecutor",
    "ScoreConfig",
    "HttpToolExecutor",
    "HttpToolConfig",
    "HumanApprovalExecutor",
    "ApprovalConfig",
    # MCP servers' tools (more in runtime_core.steps.mcp_tool)
    "McpToolExecutor",
    "McpServers",
    # Test executors
    "NoopExecutor",
    "FlakyExecutor",
    "FlakyConfig",
    "WaitForFileExecutor",
    "WaitForFileConfig",
]
