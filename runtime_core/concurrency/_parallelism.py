"""`config.concurrency.maxDegreeOfParallelism`: how many steps of one execution run at once.

Owns reading the pipeline-level limit. The engine starts at most that many workers for an
execution and a runtime instance holds no more workers than that for it, so the limit holds
however many workers the instance has. Must not count or lease anything: unlike the
distributed limits, it bounds local parallelism and needs no Redis.
"""

from __future__ import annotations

from typing import Any

from runtime_core.concurrency._definition import parse_concurrency_definition
from runtime_core.errors import InvalidPipelineError


def parallelism_limit(pipeline_config: dict[str, Any] | None) -> int | None:
    """The pipeline's maxDegreeOfParallelism, None when unset (or invalid: validation refuses
    such a pipeline before an execution exists, so running code treats it as unset)."""
    try:
        definition = parse_concurrency_definition(pipeline_config)
    except InvalidPipelineError:
        return None
    return definition.max_degree_of_parallelism if definition else None
