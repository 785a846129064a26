"""Issue 14.1: the public step API and plug-in loading, without Redis.

`@step` functions and step classes; the rules every step meets when registered; the submit-time
config check (step and field named); loading plug-ins from `module:attr` references and from
entry points of installed distributions (a real `.dist-info` on sys.path), and the start-up
errors that name the plug-in that failed.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import parse_pipeline
from runtime_core.plugins import PluginLoadError, StepPluginSettings, load_step_plugins
from runtime_core.steps import ExecutorRegistry, check_step_configs, default_executor_registry
from runtime_core.steps.api import (
    PROVIDER_RETRY,
    STEP_ENTRY_POINT_GROUP,
    FunctionStep,
    StepConfig,
    StepDefinitionError,
    StepFailure,
    StepInvocation,
    step,
    step_result,
)


class GreetConfig(StepConfig):
    greeting: str = Field(min_length=1)
    times: int = Field(default=1, ge=1, le=3)


@step("demo.greet", config=GreetConfig)
async def greet(config: GreetConfig, invocation: StepInvocation) -> dict[str, Any]:
    """Greet the `name` input.

    More text that is not part of the description."""
    return step_result({"text": " ".join([f"{config.greeting}, {invocation.inputs['name']}"] * config.times)})


def _invocation(config: dict[str, Any], inputs: dict[str, Any] | None = None) -> StepInvocation:
    return StepInvocation(
        execution_id="exec_1",
        pipeline_name="p",
        pipeline_version="1",
        step_name="hello",
        step_key="demo.greet",
        config=config,
        inputs=inputs or {"name": "Ada"},
        state={},
        attempt=0,
    )


def _no_entry_points(*references: str) -> StepPluginSettings:
    return StepPluginSettings(entry_points=False, references=references)


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path for this test's plug-in modules (and distributions)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _module(directory: Path, name: str, source: str) -> None:
    (directory / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")


# Writing a step


async def test_a_step_function_gets_its_config_parsed_into_its_model() -> None:
    assert isinstance(greet, FunctionStep)
    assert (greet.step_key, greet.config_model) == ("demo.greet", GreetConfig)
    assert greet.description == "Greet the `name` input."

    result = await greet.execute(_invocation({"greeting": "Hi", "times": 2, "retry": {"maxRetries": 1}}))

    assert result == {"data": {"text": "Hi, Ada Hi, Ada"}}


async def test_a_step_function_run_with_a_bad_config_fails_permanently_naming_the_field() -> None:
    with pytest.raises(StepFailure) as failure:
        await greet.execute(_invocation({"greeting": "Hi", "times": 9}))

    assert failure.value.code == "permanent"
    assert "step 'hello' (demo.greet) has an invalid config: times:" in failure.value.message


def test_step_refuses_a_function_that_is_not_async() -> None:
    def not_async(config: StepConfig, invocation: StepInvocation) -> None: ...

    with pytest.raises(TypeError, match=r"@step\('demo.sync'\) needs an `async def` function"):
        step("demo.sync")(not_async)  # type: ignore[arg-type]


class _NoKey:
    async def execute(self, invocation: StepInvocation) -> None: ...


class _SyncExecute:
    step_key = "demo.sync"

    def execute(self, invocation: StepInvocation) -> None: ...


class _BadModel:
    step_key = "demo.model"
    config_model = dict

    async def execute(self, invocation: StepInvocation) -> None: ...


@pytest.mark.parametrize(
    ("executor", "rule"),
    [
        (_NoKey(), "needs a `step_key` string"),
        (_SyncExecute(), "needs an `async def execute"),
        (_BadModel(), "`config_model` that is not a pydantic model class"),
    ],
    ids=["no-step-key", "sync-execute", "config-model-not-pydantic"],
)
def test_the_registry_refuses_an_object_that_is_not_a_step(executor: Any, rule: str) -> None:
    with pytest.raises(StepDefinitionError, match=rule):
        ExecutorRegistry([executor])


def test_every_builtin_step_declares_a_config_model_and_publishes_its_schema() -> None:
    described = {d.step_key: d for d in default_executor_registry().describe()}

    assert {d.source for d in described.values()} == {"builtin"}
    assert all(d.description for d in described.values())
    retrieval = described["rag.retrieval"].config_schema
    assert retrieval["required"] == ["operation"] and "providerKey" in retrieval["properties"]
    assert described["human.approval"].input_schema is not None


# The submit-time config check


@pytest.mark.parametrize(
    ("step_config", "message"),
    [
        ({"provider": "relational"}, "Step 'candidate' (rag.retrieval) has an invalid config: operation:"),
        ({"operation": 7}, "operation: Input should be a valid string"),
    ],
    ids=["required-missing", "wrong-type"],
)
def test_a_builtin_step_config_that_does_not_fit_its_model_is_refused_naming_step_and_field(
    step_config: dict[str, Any], message: str
) -> None:
    pipeline = parse_pipeline(
        {"name": "p", "steps": [{"name": "candidate", "stepKey": "rag.retrieval", "config": step_config}]}
    )

    with pytest.raises(InvalidPipelineError) as refused:
        check_step_configs(pipeline.steps, default_executor_registry())

    assert refused.value.rule == "step_config"
    assert message in refused.value.message
    assert "rag.retrieval" in (refused.value.hint or "")


def test_a_config_check_hook_refusal_is_reported_as_an_unconfigured_provider() -> None:
    from runtime_core.steps import StepConfigError

    class Checked:
        step_key = "demo.checked"
        config_model = GreetConfig

        def check_config(self, config: GreetConfig) -> None:
            raise StepConfigError(f"no greeter for {config.greeting!r}", hint="Configure one.")

        async def execute(self, invocation: StepInvocation) -> None: ...

    pipeline = parse_pipeline(
        {"name": "p", "steps": [{"name": "a", "stepKey": "demo.checked", "config": {"greeting": "Hi"}}]}
    )

    with pytest.raises(InvalidPipelineError) as refused:
        check_step_configs(pipeline.steps, ExecutorRegistry([Checked()]))

    assert (refused.value.rule, refused.value.hint) == ("provider_configured", "Configure one.")
    assert refused.value.message == "Step 'a' (demo.checked): no greeter for 'Hi'"


# Loading plug-ins


def test_a_reference_may_name_a_step_a_step_class_a_list_or_a_factory(plugin_dir: Path) -> None:
    _module(
        plugin_dir,
        "ref_steps",
        """
        from runtime_core.steps.api import StepConfig, step

        @step("ref.one")
        async def one(config, invocation):
            return {"data": 1}

        class Two:
            step_key = "ref.two"
            config_model = StepConfig

            async def execute(self, invocation):
                return {"data": 2}

        @step("ref.three")
        async def three(config, invocation):
            return {"data": 3}

        BOTH = [one, Two]

        def build():
            return (three,)
        """,
    )
    registry = default_executor_registry()

    added = load_step_plugins(
        registry, _no_entry_points("ref_steps:BOTH", "ref_steps:build", "ref_steps:one")
    )

    assert added == ["ref.one", "ref.two", "ref.three"]  # `one` again is the same step: not an error
    assert registry.source("ref.two") == "reference 'ref_steps:BOTH'"
    assert registry.source("ref.three") == "reference 'ref_steps:build'"


@pytest.mark.parametrize(
    ("source", "reference", "message"),
    [
        (
            "raise RuntimeError('plug-in misconfigured')",
            "bad_import:x",
            "RuntimeError: plug-in misconfigured",
        ),
        ("X = 1", "bad_attr:Y", "AttributeError: module 'bad_attr' has no attribute 'Y'"),
        ("X = 1", "bad_value:X", "exports something that is not a step"),
        ("async def run(config, invocation): ...", "bad_async:run", "without declaring it: decorate it"),
        ("X = []", "bad_empty:X", "exports no steps"),
    ],
    ids=["raises-on-import", "missing-attribute", "not-a-step", "undecorated-function", "empty"],
)
def test_a_reference_that_fails_to_load_is_an_error_naming_it(
    plugin_dir: Path, source: str, reference: str, message: str
) -> None:
    _module(plugin_dir, reference.split(":")[0], source)

    with pytest.raises(PluginLoadError) as failure:
        load_step_plugins(default_executor_registry(), _no_entry_points(reference))

    assert failure.value.code == "plugin_load_failed"
    assert f"Step plug-in reference '{reference}'" in failure.value.message
    assert message in failure.value.message


def test_a_reference_not_of_the_module_attr_form_is_refused() -> None:
    with pytest.raises(PluginLoadError, match=r"is not of the form 'package\.module:attribute'"):
        load_step_plugins(default_executor_registry(), _no_entry_points("just_a_module"))


def test_a_plugin_may_not_take_a_step_key_already_registered(plugin_dir: Path) -> None:
    _module(
        plugin_dir,
        "shadow",
        """
        from runtime_core.steps.api import step

        @step("rag.merge")
        async def merge(config, invocation):
            return {"data": "not the real merge"}
        """,
    )
    registry = default_executor_registry()

    with pytest.raises(PluginLoadError) as failure:
        load_step_plugins(registry, _no_entry_points("shadow:merge"))

    assert "declares step key 'rag.merge', already registered by builtin" in failure.value.message
    assert registry.source("rag.merge") == "builtin"


def _distribution(directory: Path, name: str, entry_points: str) -> None:
    """An installed distribution, as pip leaves it: `<name>-1.0.dist-info` with entry_points.txt."""
    info = directory / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{STEP_ENTRY_POINT_GROUP}]\n{entry_points}\n", encoding="utf-8")


def test_an_installed_entry_point_registers_its_steps_under_its_name(plugin_dir: Path) -> None:
    _module(
        plugin_dir,
        "ep_steps",
        """
        from runtime_core.steps.api import step

        @step("ep.hello")
        async def hello(config, invocation):
            return {"data": "hello"}
        """,
    )
    _distribution(plugin_dir, "ep_plugin", "hello = ep_steps:hello")
    registry = default_executor_registry()

    load_step_plugins(registry, StepPluginSettings())

    assert registry.source("ep.hello") == "entry point 'hello' (ep_plugin 1.0)"


def test_an_entry_point_that_fails_to_import_is_an_error_naming_it(plugin_dir: Path) -> None:
    _distribution(plugin_dir, "broken_plugin", "broken = broken_steps_missing:STEPS")

    with pytest.raises(PluginLoadError) as failure:
        load_step_plugins(default_executor_registry(), StepPluginSettings())

    assert failure.value.message.startswith(
        "Step plug-in entry point 'broken = broken_steps_missing:STEPS' (group mcp_runtime.steps, "
        "distribution broken_plugin 1.0) failed to load: ModuleNotFoundError"
    )
    assert failure.value.hint == "Fix the plug-in package, or `pip uninstall broken_plugin`."


def test_entry_points_are_not_loaded_when_turned_off(plugin_dir: Path) -> None:
    _distribution(plugin_dir, "broken_plugin", "broken = broken_steps_missing:STEPS")

    assert load_step_plugins(default_executor_registry(), _no_entry_points()) == []


def test_plugin_settings_read_references_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_RUNTIME_STEPS", "a.b:c, d:e")
    monkeypatch.setenv("MCP_RUNTIME_STEP_ENTRY_POINTS", "0")

    settings = StepPluginSettings.from_env().with_references(["d:e,f:g"])

    assert settings == StepPluginSettings(entry_points=False, references=("a.b:c", "d:e", "f:g"))


def test_a_config_model_need_not_derive_from_step_config() -> None:
    class Plain(BaseModel):
        size: int

    @step("demo.plain", config=Plain)  # type: ignore[type-var]
    async def plain(config: Plain, invocation: StepInvocation) -> int:
        return config.size

    registry = ExecutorRegistry([plain])
    assert registry.config_model("demo.plain") is Plain


# Retries by default, and keys no step type declares


def test_a_step_may_declare_the_retry_it_uses_without_a_retry_section_and_it_is_published() -> None:
    @step("demo.calls", default_retry=PROVIDER_RETRY)
    async def calls(config: StepConfig, invocation: StepInvocation) -> int:
        return 1

    registry = ExecutorRegistry([calls])
    assert registry.default_retry("demo.calls") == PROVIDER_RETRY
    assert registry.describe("demo.calls")[0].default_retry == PROVIDER_RETRY
    builtin = default_executor_registry()
    assert {key for key in builtin.keys() if builtin.default_retry(key)} == {
        "ai.prompt",
        "rag.retrieval",
        "tool.http",
    }


def test_a_default_retry_that_is_not_a_retry_section_is_refused_at_registration() -> None:
    class Wrong:
        step_key = "demo.wrong"
        default_retry = {"maxRetry": 3}

        async def execute(self, invocation: StepInvocation) -> None: ...

    with pytest.raises(StepDefinitionError, match=r"unknown key `maxRetry`: did you mean `maxRetries`\?"):
        ExecutorRegistry([Wrong()])


class _Limits(StepConfig):
    max_turns: int = 3


class _Nested(StepConfig):
    label: str = "x"
    limits: _Limits = _Limits()
    tools: list[_Limits] = []


class _Open(StepConfig):
    model_config = ConfigDict(extra="allow")
    label: str = "x"


@pytest.mark.parametrize(
    ("model", "config", "refused"),
    [
        (_Nested, {"lable": "y"}, "unknown config key `lable`: did you mean `label`?"),
        (
            _Nested,
            {"limits": {"maxTurn": 2}},
            "unknown config key `limits.maxTurn`: did you mean `maxTurns`?",
        ),
        (_Nested, {"tools": [{}, {"max_turn": 1}]}, "unknown config key `tools[1].max_turn`: did you mean"),
        (
            _Nested,
            {"maxRetries": 2},
            '`maxRetries` belongs in the `retry` section: "retry": {"maxRetries": ...}',
        ),
        (_Nested, {"zzz": 1}, "unknown config key `zzz`: no key of this step type is close to it."),
        (_Nested, {"label": "y", "retry": {}, "timeoutMs": 5, "concurrency": {}}, None),
        (_Nested, {"limits": {"max_turns": 2}, "sourceSteps": [], "sourceStep": "a"}, None),
        (StepConfig, {"anything": 1}, None),  # the step declares no config: it reads its own keys
        (_Open, {"anything": 1}, None),  # extra keys allowed by the model
    ],
)
def test_a_config_key_its_step_type_does_not_declare_is_refused_with_the_key_meant(
    model: type[BaseModel], config: dict[str, Any], refused: str | None
) -> None:
    @step("demo.keys", config=model)  # type: ignore[type-var]
    async def keys(config: BaseModel, invocation: StepInvocation) -> int:
        return 1

    pipeline = parse_pipeline(
        {"name": "p", "steps": [{"name": "k", "stepKey": "demo.keys", "config": config}]}
    )
    if refused is None:
        check_step_configs(pipeline.steps, ExecutorRegistry([keys]))
        return
    with pytest.raises(InvalidPipelineError) as error:
        check_step_configs(pipeline.steps, ExecutorRegistry([keys]))
    assert error.value.rule == "step_config"
    assert refused in error.value.message
    assert "Known keys here: " in (error.value.hint or "")


def test_the_specifications_retrieval_steps_keep_validating() -> None:
    pipeline = parse_pipeline(
        {
            "name": "spec",
            "steps": [
                {
                    "name": "candidate",
                    "stepKey": "rag.retrieval",
                    "config": {
                        "operation": "candidate.byId",
                        "provider": "relational",
                        "executionMode": "provider",
                    },
                }
            ],
        }
    )
    check_step_configs(pipeline.steps, default_executor_registry())
