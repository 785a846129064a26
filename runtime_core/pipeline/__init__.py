"""Pipeline definitions: models, validation and input-binding resolution.

Owns the pydantic models of the pipeline JSON format, the validation rules (each failure
names its rule), the catalog of named pipelines and the pure resolution of `state.*` /
`steps.<name>.result[.path]` bindings. Must not touch Redis or execute anything.
"""

from runtime_core.pipeline._bindings import (
    Binding,
    BindingError,
    effective_step_inputs,
    parse_binding,
    resolve_inputs,
    steps_read_by,
)
from runtime_core.pipeline._catalog import PipelineCatalog
from runtime_core.pipeline._models import PipelineDefinition, StepDefinition, parse_pipeline
from runtime_core.pipeline._validation import validate_pipeline

__all__ = [
    # Bindings
    "Binding",
    "BindingError",
    # Catalog
    "PipelineCatalog",
    # Models
    "PipelineDefinition",
    "StepDefinition",
    "effective_step_inputs",
    "parse_binding",
    "parse_pipeline",
    "resolve_inputs",
    "steps_read_by",
    # Validation
    "validate_pipeline",
]
