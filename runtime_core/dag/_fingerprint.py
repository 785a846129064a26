"""The terminal fingerprint: what must be identical however an execution was scheduled."""

from __future__ import annotations

import hashlib

from runtime_core.dag._records import ExecutionView
from runtime_core.steps import canonical_json


def execution_fingerprint(view: ExecutionView) -> str:
    """sha256 over ExecutionId, pipeline, status, per-step status/retries and result hashes.

    Recovery counts are deliberately excluded: a recovered worker crash must not change it.
    """
    body = {
        "execution_id": view.meta.execution_id,
        "pipeline": view.meta.pipeline.key,
        "status": view.meta.status,
        "steps": [
            {
                "name": step.name,
                "status": step.status,
                "retry_count": step.retry_count,
                "result_sha256": hashlib.sha256(canonical_json(step.result).encode()).hexdigest()
                if step.result is not None
                else None,
            }
            for step in sorted(view.steps, key=lambda s: s.name)
        ],
    }
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()
