"""Seed 003: the `{"pipelines": [...]}` wrapper parses to the same pipeline as the bare form,
from text and from an object, through parse_pipeline, the catalog and the engine's validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import PipelineCatalog, parse_pipeline, parse_pipelines, validate_pipeline
from runtime_core.steps import default_executor_registry

# The seed's own example, verbatim (section "Pipeline Definition" of the RAG walkthrough).
SEED_WRAPPER = """{
  "pipelines": [
    {
      "name": "rag-final-test",
      "version": "1",
      "executionMode": "Dag",
      "steps": [
        {
          "name": "candidate",
          "stepKey": "rag.retrieval",
          "order": 1,
          "input": {
            "candidateId": "state.candidateId"
          },
          "config": {
            "operation": "candidate.byId",
            "provider": "relational",
            "providerKey": "sqlserver",
            "executionMode": "provider"
          }
        },
        {
          "name": "job",
          "stepKey": "rag.retrieval",
          "order": 2,
          "input": {
            "jobId": "state.jobId"
          },
          "config": {
            "operation": "job.byId",
            "provider": "relational",
            "providerKey": "postgres",
            "executionMode": "provider"
          }
        },
        {
          "name": "merge",
          "stepKey": "rag.merge",
          "order": 3,
          "dependsOn": [
            "candidate",
            "job"
          ],
          "config": {
            "sourceSteps": [
              "candidate",
              "job"
            ]
          }
        },
        {
          "name": "compose",
          "stepKey": "rag.compose",
          "order": 4,
          "dependsOn": [
            "merge"
          ],
          "config": {
            "sourceStep": "merge",
            "composer": "deterministic"
          }
        }
      ]
    }
  ]
}
"""
BARE = json.dumps(json.loads(SEED_WRAPPER)["pipelines"][0])


@pytest.mark.parametrize("as_text", [True, False], ids=["json-text", "json-object"])
def test_the_seed_wrapper_parses_to_the_same_pipeline_as_the_bare_form(as_text: bool) -> None:
    wrapped = SEED_WRAPPER if as_text else json.loads(SEED_WRAPPER)
    bare = BARE if as_text else json.loads(BARE)

    from_wrapper, from_bare = parse_pipeline(wrapped), parse_pipeline(bare)

    assert from_wrapper == from_bare
    assert from_wrapper.to_json() == from_bare.to_json()
    assert [step.name for step in from_wrapper.steps] == ["candidate", "job", "merge", "compose"]
    assert from_wrapper.step("candidate").config["providerKey"] == "sqlserver"
    validate_pipeline(from_wrapper, default_executor_registry().keys())


def test_parse_pipelines_reads_every_pipeline_of_a_wrapper_and_one_of_a_bare_document() -> None:
    second = {**json.loads(BARE), "name": "rag-second"}
    document = json.dumps({"pipelines": [json.loads(BARE), second]})

    assert [p.name for p in parse_pipelines(document)] == ["rag-final-test", "rag-second"]
    assert parse_pipelines(BARE) == [parse_pipeline(BARE)]


def test_a_catalog_file_may_hold_several_wrapped_pipelines(tmp_path: Path) -> None:
    second = {**json.loads(BARE), "name": "rag-second"}
    (tmp_path / "two.json").write_text(
        json.dumps({"pipelines": [json.loads(BARE), second]}), encoding="utf-8"
    )
    (tmp_path / "one.json").write_text(SEED_WRAPPER.replace("rag-final-test", "rag-third"), encoding="utf-8")

    catalog = PipelineCatalog.from_directory(tmp_path)

    assert catalog.names() == ["rag-final-test", "rag-second", "rag-third"]
    assert catalog.get("rag-final-test") == parse_pipeline(BARE)


@pytest.mark.parametrize(
    ("document", "rule"),
    [
        ({"pipelines": []}, "single_pipeline"),
        ({"pipelines": [json.loads(BARE), json.loads(BARE)]}, "single_pipeline"),
        ({"pipelines": "rag-final-test"}, "single_pipeline"),
        ({"pipelines": [["not", "an", "object"]]}, "schema"),
    ],
    ids=["empty", "two-at-submit", "not-a-list", "item-not-an-object"],
)
def test_a_wrapper_that_does_not_hold_exactly_one_pipeline_object_is_refused(
    document: dict[str, object], rule: str
) -> None:
    with pytest.raises(InvalidPipelineError) as refused:
        parse_pipeline(document)

    assert refused.value.rule == rule
