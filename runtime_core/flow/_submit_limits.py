"""The rate limits a submit must pass, as cells of the script that creates the run.

Owns which limits apply to a new run (its tenant's, from the tenants file, and its
pipeline's, from `config.flow.rateLimits`; a tenant's `"at": "dispatch"` limits are taken by
the claim instead, `dispatch_cells`), the field each limit's state has in the queue
partition's rates hash (a tenant's runs all live in one partition, so the script creating a
run takes from every limit and creates the run in one atomic step, or does neither), and the
refusal a limited submit answers. Must not touch Redis.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from runtime_core.flow._declarations import PipelineFlow, TenantRateLimits
from runtime_core.flow._rate_limits import GcraCell, RateLimitedError, retry_after_ms

_SEP = "\x1f"


def submit_cells(
    tenant_id: str, pipeline_name: str, tenants: TenantRateLimits, flow: PipelineFlow
) -> list[GcraCell]:
    """Every rate limit a new run of `pipeline_name` by `tenant_id` takes a unit from."""
    cells = _tenant_cells(tenant_id, tenants, "submit")
    cells += [
        GcraCell(
            field=_SEP.join(("pipeline", tenant_id, pipeline_name, limit.name)),
            label=f"'{limit.name}' of pipeline '{pipeline_name}' ({limit.describe()})",
            limit=limit,
        )
        for limit in flow.rate_limits
    ]
    return cells


def dispatch_cells(tenant_id: str, tenants: TenantRateLimits) -> list[GcraCell]:
    """The tenant's dispatch rate limits (`"at": "dispatch"`): the claim script takes a unit of
    each before it claims one of the tenant's runs, and passes the tenant over while they
    refuse (its runs wait queued, in their place)."""
    return _tenant_cells(tenant_id, tenants, "dispatch")


def _tenant_cells(tenant_id: str, tenants: TenantRateLimits, at: str) -> list[GcraCell]:
    where = "" if at == "submit" else " at dispatch"
    return [
        GcraCell(
            field=_SEP.join(("tenant" if at == "submit" else "dispatch", tenant_id, limit.name)),
            label=f"'{limit.name}' of tenant '{tenant_id}'{where} ({limit.describe()})",
            limit=limit,
        )
        for limit in tenants.of_tenant(tenant_id)
        if limit.at == at
    ]


def cells_json(cells: Sequence[GcraCell]) -> str:
    """The cells as a script argument (`[[field, interval_us, tolerance_us], ...]`)."""
    return json.dumps([cell.argument() for cell in cells])


def submit_refused(cells: Sequence[GcraCell], field: str | None, wait_us: int | None) -> RateLimitedError:
    """The `[rate_limited]` answer to a submit the script refused on `field`."""
    label = next((cell.label for cell in cells if cell.field == field), field or "?")
    return RateLimitedError("The submit", label, retry_after_ms(wait_us or 0))
