"""Pydantic models of the pipeline JSON format (camelCase on the wire)."""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime_core.errors import InvalidPipelineError
from runtime_core.pipeline._limits import (
    check_depth,
    check_size,
    dumps_strict,
    loads_strict,
    pipeline_limits,
    text_size,
)


class StepDefinition(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    name: str = ""
    step_key: str = Field("", alias="stepKey")
    order: int | None = None
    depends_on: tuple[str, ...] = Field((), alias="dependsOn")
    input: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)


_LOOKUPS = "_derived_lookups"


@dataclass(frozen=True)
class _DerivedLookups:
    """What a pipeline's readers look up by name, computed from one steps tuple."""

    steps: tuple[StepDefinition, ...]
    by_name: dict[str, StepDefinition]
    sinks: frozenset[str]
    keys: dict[str, str]

    @classmethod
    def of(cls, steps: tuple[StepDefinition, ...]) -> _DerivedLookups:
        by_name: dict[str, StepDefinition] = {}
        for step in steps:
            by_name.setdefault(step.name, step)  # the first of a duplicated name, as before
        feeding = {dep for step in steps for dep in step.depends_on}
        sinks = frozenset(step.name for step in steps if step.name not in feeding)
        return cls(steps, by_name, sinks, {step.name: step.step_key for step in steps})


class PipelineDefinition(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    name: str = ""
    version: str = "1"
    execution_mode: str = Field("Dag", alias="executionMode")
    description: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    steps: tuple[StepDefinition, ...] = ()

    @property
    def key(self) -> str:
        """Stable pipeline key `name:version` used by concurrency scopes."""
        return f"{self.name}:{self.version}"

    def step(self, name: str) -> StepDefinition:
        return self._steps_by_name[name]

    def sink_step_names(self) -> frozenset[str]:
        """Steps no other step depends on: their results are the run's result."""
        return self._sink_names

    def step_keys(self) -> dict[str, str]:
        """Each step's name -> its step key (the caller must not change the mapping)."""
        return self._step_keys

    # Derived once per steps tuple (the definition is frozen; model_copy with new steps gets a
    # new tuple): a reader paging through a 100,000-step run asks for these on every page, and
    # must not walk every step each time.
    @property
    def _derived(self) -> _DerivedLookups:
        # Kept in the instance's __dict__ beside the fields: pydantic compares, dumps and
        # validates fields only, so the cache changes none of them.
        derived = self.__dict__.get(_LOOKUPS)
        if derived is None or derived.steps is not self.steps:
            derived = self.__dict__[_LOOKUPS] = _DerivedLookups.of(self.steps)
        return derived

    @property
    def _steps_by_name(self) -> dict[str, StepDefinition]:
        return self._derived.by_name

    @property
    def _sink_names(self) -> frozenset[str]:
        return self._derived.sinks

    @property
    def _step_keys(self) -> dict[str, str]:
        return self._derived.keys

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True)


def parse_pipeline(raw: str | bytes | dict[str, Any]) -> PipelineDefinition:
    """Parse one pipeline: a bare object, or the seed's `{"pipelines": [one]}` wrapper, which
    gives the same pipeline as its bare form.

    Only strict JSON up to the process's `pipeline_limits().max_bytes` and `MAX_JSON_DEPTH`
    levels is accepted; anything else is an InvalidPipelineError or InputTooLargeError, never
    another exception.
    """
    return _parse(raw, pipeline_limits().max_bytes)


def _parse(raw: str | bytes | dict[str, Any], max_bytes: int | None) -> PipelineDefinition:
    data = _document(raw, max_bytes)
    if _is_wrapper(data):
        pipelines = data["pipelines"]
        if not isinstance(pipelines, list) or len(pipelines) != 1:
            raise InvalidPipelineError(
                "single_pipeline",
                "Expected exactly one pipeline in 'pipelines'.",
                hint="Submit one pipeline object, or add the file to the catalog.",
            )
        data = pipelines[0]
    return _pipeline(data)


# Stored pipelines are parsed once per distinct text: every run of one pipeline stores the
# same JSON, and a queued run is read back on every dispatch attempt. Bounded: at most this
# many texts of at most this size are kept, and the few latest larger ones (a wide execution
# is read back by each process advancing it: its owner's observers, an assisting instance,
# whose parse of a 9,000-step pipeline costs about half a second).
_STORED_PIPELINES_KEPT = 128
_STORED_PIPELINE_CACHED_BYTES = 64 * 1024
_LARGE_STORED_PIPELINES_KEPT = 4


def parse_stored_pipeline(raw: str) -> PipelineDefinition:
    """A pipeline read back from where it was stored after `parse_pipeline` accepted it (a
    shared run record, an execution's metadata): the same result, parsed once per distinct
    text. The models are frozen, so one parsed pipeline is safely shared."""
    if len(raw) > _STORED_PIPELINE_CACHED_BYTES:
        pipeline = _large_stored.pop(raw, None) or _parse(raw, None)
        remember_stored_pipeline(raw, pipeline)
        return pipeline
    return _parse_stored(raw)


def remember_stored_pipeline(raw: str, pipeline: PipelineDefinition) -> None:
    """`raw` is `pipeline.to_json()`, just stored by this process: reading it back gives
    `pipeline` without parsing it again (a large one only: the owner of a wide execution reads
    its metadata back at its end, for the terminal snapshot)."""
    if len(raw) <= _STORED_PIPELINE_CACHED_BYTES:
        return
    _large_stored[raw] = pipeline
    _large_stored.move_to_end(raw)
    while len(_large_stored) > _LARGE_STORED_PIPELINES_KEPT:
        _large_stored.popitem(last=False)


# Not held to this process's size limit: the process that stored it accepted it.
@functools.lru_cache(maxsize=_STORED_PIPELINES_KEPT)
def _parse_stored(raw: str) -> PipelineDefinition:
    return _parse(raw, None)


_large_stored: OrderedDict[str, PipelineDefinition] = OrderedDict()  # latest last


def parse_pipelines(raw: str | bytes | dict[str, Any]) -> list[PipelineDefinition]:
    """Every pipeline of a document: a bare pipeline object, or `{"pipelines": [...]}` with any
    number of them (how a catalog file may hold several). Same limits and errors as parse_pipeline."""
    data = _document(raw, pipeline_limits().max_bytes)
    if not _is_wrapper(data):
        return [_pipeline(data)]
    if not isinstance(data["pipelines"], list):
        raise InvalidPipelineError("schema", "'pipelines' must be a list of pipeline objects.")
    return [_pipeline(item) for item in data["pipelines"]]


def _document(raw: str | bytes | dict[str, Any], max_bytes: int | None) -> Any:
    """The strict-JSON document; `max_bytes` None: a stored text `parse_pipeline` accepted
    before, whose size and nesting are not measured again (the walk over every value of a
    9,000-step pipeline costs more than validating its models). Still strict JSON, and a text
    nested past what `json` decodes is an InvalidPipelineError, never another exception."""
    if isinstance(raw, str | bytes):
        if max_bytes is None:
            return loads_strict(raw, "Pipeline")
        check_size(text_size(raw), max_bytes, "Pipeline")
        data = loads_strict(raw, "Pipeline")
        check_depth(data, "Pipeline")
        return data
    encoded = dumps_strict(raw, "Pipeline")
    if max_bytes is not None:
        check_size(len(encoded), max_bytes, "Pipeline")
    return raw


def _is_wrapper(data: Any) -> bool:
    return isinstance(data, dict) and "pipelines" in data and "steps" not in data


def _pipeline(data: Any) -> PipelineDefinition:
    if not isinstance(data, dict):
        raise InvalidPipelineError("schema", "A pipeline must be a JSON object.")
    try:
        return PipelineDefinition.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidPipelineError(
            "schema", f"Pipeline field '{where}': {first['msg']}.", hint="Fix the field and submit again."
        ) from exc
