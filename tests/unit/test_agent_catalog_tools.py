"""`inline_catalog_pipelines`: an agent tool's catalog pipeline name is replaced by the pipeline's
definition at submit, in nested agents too; an unknown name and a cycle are refused, naming the
step and the tool."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_core.agents import inline_catalog_pipelines
from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import PipelineCatalog, PipelineDefinition, parse_pipeline


def agent(name: str, *tools: tuple[str, Any]) -> PipelineDefinition:
    config = {"prompt": "Work", "tools": [{"name": tool, "pipeline": pipeline} for tool, pipeline in tools]}
    return parse_pipeline(
        {"name": name, "steps": [{"name": "agent", "stepKey": "ai.agent", "config": config}]}
    )


LEAF = parse_pipeline({"name": "leaf", "steps": [{"name": "only", "stepKey": "test.noop"}]})


def tool_pipeline(pipeline: PipelineDefinition, index: int = 0) -> Any:
    return pipeline.steps[0].config["tools"][index]["pipeline"]


def test_a_name_becomes_the_catalog_definition_in_nested_agents_too() -> None:
    catalog = PipelineCatalog({"leaf": LEAF, "middle": agent("middle", ("leaf-tool", "leaf"))})
    inline_child = agent("inline", ("deep", "leaf")).model_dump(mode="json", by_alias=True)
    top = agent("top", ("mid", "middle"), ("inline", inline_child))

    resolved = inline_catalog_pipelines(top, catalog.get)

    middle = parse_pipeline(tool_pipeline(resolved, 0))
    assert middle.name == "middle" and parse_pipeline(tool_pipeline(middle)) == LEAF
    inline = parse_pipeline(tool_pipeline(resolved, 1))
    assert parse_pipeline(tool_pipeline(inline)) == LEAF
    assert inline_catalog_pipelines(LEAF, catalog.get) is LEAF  # nothing named: the same pipeline


def test_an_unknown_name_is_refused_with_the_known_pipelines() -> None:
    catalog = PipelineCatalog({"leaf": LEAF})
    with pytest.raises(InvalidPipelineError) as refused:
        inline_catalog_pipelines(agent("top", ("lookup", "missing")), catalog.get)
    assert refused.value.rule == "step_config"
    assert refused.value.message == (
        "Step 'agent' (ai.agent): tool 'lookup' names pipeline 'missing', which is not in the catalog."
    )
    assert refused.value.hint is not None and "leaf" in refused.value.hint


def test_a_pipeline_tool_that_runs_a_pipeline_it_is_part_of_is_refused() -> None:
    catalog = PipelineCatalog(
        {"ping": agent("ping", ("to-pong", "pong")), "pong": agent("pong", ("to-ping", "ping"))}
    )
    with pytest.raises(InvalidPipelineError) as refused:
        inline_catalog_pipelines(catalog.get("ping"), catalog.get)
    assert "ping -> pong -> ping would never end" in refused.value.message
