"""The runs list's data access: the same query, arguments and permission as the `runs.list` tool.

Owns turning the list page's query string into the tool's own input model (`RunsListInput`:
the same filters, limits and id rules; empty fields and unknown parameters are left out, as
a browser form sends them) and the run catalog query the tool calls
(`ControlPlane.list_runs`: hot and archived runs of the caller's tenant, newest first, with
cursor pages). Must not render or authorize: the page admits the caller for LISTING_TOOL.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcp_runtime._inputs import RunsListInput
from runtime_core.control_plane import ControlPlane
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import RunListPage, RunListQuery

LISTING_TOOL = "runs.list"


def run_filters(query: Mapping[str, str]) -> RunListQuery:
    """The listing query of a page's query string, checked by the tool's input model."""
    sent = {
        name: value for name, value in query.items() if name in RunsListInput.model_fields and value != ""
    }
    return RunListQuery.model_validate(RunsListInput.model_validate(sent).model_dump())


async def list_runs(
    control_plane: ControlPlane, filters: RunListQuery, snapshot: ExecutionContextSnapshot
) -> RunListPage:
    """The caller's tenant's runs (the tenant is the snapshot's, always)."""
    return await control_plane.list_runs(filters, snapshot)
