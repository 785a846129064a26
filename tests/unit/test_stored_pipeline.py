"""Pipelines read back from the store are parsed once per distinct text (the dispatcher reads
a queued run's record on every attempt; every run of a pipeline stores the same JSON)."""

from __future__ import annotations

import pytest

from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline import parse_pipeline, parse_stored_pipeline, remember_stored_pipeline


def _pipeline_text(name: str, steps: int = 3) -> str:
    body = [{"name": f"s{i}", "stepKey": "test.noop"} for i in range(steps)]
    return parse_pipeline({"name": name, "steps": body}).to_json()


def test_the_same_text_gives_the_same_parsed_pipeline_once() -> None:
    text = _pipeline_text("stored-once")
    first, again = parse_stored_pipeline(text), parse_stored_pipeline(text)
    assert first is again
    assert first == parse_pipeline(text)
    assert parse_stored_pipeline(_pipeline_text("stored-other")) is not first


def test_only_the_latest_few_large_pipelines_are_kept() -> None:
    text = _pipeline_text("stored-large", steps=1200)
    assert len(text) > 64 * 1024
    first, again = parse_stored_pipeline(text), parse_stored_pipeline(text)
    assert first is again  # a wide execution read back by each process advancing it
    for n in range(4):
        parse_stored_pipeline(_pipeline_text(f"stored-large-{n}", steps=1200))
    assert parse_stored_pipeline(text) == first and parse_stored_pipeline(text) is not first


def test_a_large_pipeline_this_process_stored_reads_back_without_a_parse() -> None:
    created = parse_pipeline(_pipeline_text("stored-remembered", steps=1200))
    text = created.to_json()
    remember_stored_pipeline(text, created)  # what creating an execution does
    assert parse_stored_pipeline(text) is created  # its owner reads it back at the run's end
    small = parse_pipeline(_pipeline_text("stored-small-remembered"))
    remember_stored_pipeline(small.to_json(), small)  # small ones: the parse cache's own
    assert parse_stored_pipeline(small.to_json()) == small


def test_a_broken_stored_pipeline_is_the_same_typed_error_every_time() -> None:
    for _ in range(2):
        with pytest.raises(InvalidPipelineError):
            parse_stored_pipeline('{"name": "broken"')
