"""The normalized execution document: what terminal snapshots and replay carry.

Owns `ExecutionDocument` / `StepDocument` (plain JSON: no claim tokens, leases, owners or
claim sequence; results in their stored form, inline or payload ref) and the two
conversions: view -> document (as the JSON snapshots store) and document -> view. Must not
read any store.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime_core.dag import ExecutionMeta, ExecutionView, StepView
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import parse_pipeline
from runtime_core.retention import tenant_of
from runtime_core.steps import canonical_json

# Meta fields rebuilt from the document itself (or transient, like the claim sequence).
CORE_META_FIELDS = frozenset(
    {
        "execution_id",
        "pipeline",
        "state",
        "snapshot",
        "tenant_id",
        "status",
        "created_at_ms",
        "finalized_at_ms",
        "step_count",
        "completed_count",
        "claim_seq",
    }
)


class StepDocument(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    step_key: str
    status: str
    retry_count: int = 0
    recovery_count: int = 0
    result: Any = None
    error: Any = None


class ExecutionDocument(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    execution_id: str
    tenant_id: str
    pipeline: dict[str, Any]
    state: dict[str, Any]
    context: dict[str, Any] | None = None
    status: str
    created_at_ms: int
    finalized_at_ms: int | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    control_status: str | None = None
    steps: list[StepDocument]

    def context_snapshot(self) -> ExecutionContextSnapshot | None:
        return ExecutionContextSnapshot.model_validate(self.context) if self.context is not None else None

    def meta_fields(self) -> dict[str, str]:
        """The execution's Redis meta hash (without counters the restore recomputes)."""
        snapshot = self.context_snapshot()
        fields = {
            **self.attributes,
            "execution_id": self.execution_id,
            "pipeline": parse_pipeline(self.pipeline).to_json(),
            "state": canonical_json(self.state),
            "snapshot": snapshot.to_json() if snapshot is not None else "",
            "tenant_id": self.tenant_id,
            "status": self.status,
            "created_at_ms": str(self.created_at_ms),
        }
        if self.finalized_at_ms is not None:
            fields["finalized_at_ms"] = str(self.finalized_at_ms)
        return fields


def user_attributes(meta: ExecutionMeta) -> dict[str, str]:
    return {k: str(v) for k, v in meta.attributes.items() if k not in CORE_META_FIELDS}


def document_json(view: ExecutionView, stored_results: dict[str, Any]) -> dict[str, Any]:
    """The ExecutionDocument of a view, normalized, as the JSON a terminal snapshot stores
    (`ExecutionDocument.model_validate` reads it back); `stored_results` holds each step's
    stored form (see resolve helpers). Built as plain JSON from the view's typed fields, not
    as models dumped afterwards: 9,000 step models and their dump cost ~50 ms at the end of a
    wide run, on its critical path."""
    meta = view.meta
    return {
        "execution_id": meta.execution_id,
        "tenant_id": tenant_of(meta.snapshot),
        "pipeline": meta.pipeline.model_dump(mode="json", by_alias=True),
        "state": meta.state,
        "context": meta.snapshot.model_dump(mode="json") if meta.snapshot is not None else None,
        "status": meta.status,
        "created_at_ms": meta.created_at_ms,
        "finalized_at_ms": meta.finalized_at_ms,
        "attributes": user_attributes(meta),
        "control_status": view.control_status,
        "steps": [
            {
                "name": step.name,
                "step_key": step.step_key,
                "status": step.status,
                "retry_count": step.retry_count,
                "recovery_count": step.recovery_count,
                "result": stored_results.get(step.name, step.result),
                "error": step.error,
            }
            for step in view.steps
        ],
    }


def view_from_document(document: ExecutionDocument) -> ExecutionView:
    """The (unresolved) view a document describes; no step is owned."""
    meta = ExecutionMeta(
        execution_id=document.execution_id,
        pipeline=parse_pipeline(document.pipeline),
        state=document.state,
        snapshot=document.context_snapshot(),
        status=document.status,
        created_at_ms=document.created_at_ms,
        finalized_at_ms=document.finalized_at_ms,
        attributes=document.attributes,
    )
    steps = [
        StepView(
            name=step.name,
            step_key=step.step_key,
            status=step.status,
            retry_count=step.retry_count,
            recovery_count=step.recovery_count,
            result=step.result,
            error=step.error,
            owned=False,
        )
        for step in document.steps
    ]
    return ExecutionView(meta, steps, document.control_status)
