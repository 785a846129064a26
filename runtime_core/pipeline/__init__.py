"""Pipeline definitions: models, validation and input-binding resolution.

Owns the pydantic models of the pipeline JSON format, the validation rules (each failure
names its rule), the catalog of named pipelines, the pure resolution of `state.*` /
`steps.<name>.result[.path]` bindings, and the strict-JSON / size limits of pipelines, run
inputs and step results. Must not touch Redis or execute anything.
"""

from runtime_core.pipeline._bindings import (
    Binding,
    BindingError,
    effective_step_inputs,
    is_binding,
    parse_binding,
    resolve_inputs,
    steps_read_by,
)
from runtime_core.pipeline._catalog import PipelineCatalog
from runtime_core.pipeline._limits import (
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_MAX_RESULT_BYTES,
    MAX_BYTES_ENV,
    MAX_JSON_DEPTH,
    MAX_PIPELINE_BYTES,
    MAX_STEPS,
    MAX_STEPS_ENV,
    PipelineLimits,
    check_size,
    dumps_strict,
    encoded_strict,
    pipeline_limits,
    set_pipeline_limits,
)
from runtime_core.pipeline._models import (
    PipelineDefinition,
    StepDefinition,
    parse_pipeline,
    parse_pipelines,
    parse_stored_pipeline,
    remember_stored_pipeline,
)
from runtime_core.pipeline._validation import RetentionCheck, validate_pipeline

__all__ = [
    # Limits
    "DEFAULT_MAX_INPUT_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "MAX_BYTES_ENV",
    "MAX_JSON_DEPTH",
    "MAX_PIPELINE_BYTES",
    "MAX_STEPS",
    "MAX_STEPS_ENV",
    # Bindings
    "Binding",
    "BindingError",
    # Catalog
    "PipelineCatalog",
    # Models
    "PipelineDefinition",
    "PipelineLimits",
    "RetentionCheck",
    "StepDefinition",
    "check_size",
    "dumps_strict",
    "effective_step_inputs",
    "encoded_strict",
    "is_binding",
    "parse_binding",
    "parse_pipeline",
    "parse_pipelines",
    "parse_stored_pipeline",
    "pipeline_limits",
    "remember_stored_pipeline",
    "resolve_inputs",
    "set_pipeline_limits",
    "steps_read_by",
    # Validation
    "validate_pipeline",
]
