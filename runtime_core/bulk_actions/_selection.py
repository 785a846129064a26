"""Choosing the runs a bulk action covers: the caller's tenant's runs by ids or by filter,
refused whole when more than the per-call limit match.

Owns paging through the run catalog (`ControlPlane.list_runs`, newest first, hot and
archived alike) with the filter and a predicate, and the refusal. Must not act on runs.
"""

from __future__ import annotations

from collections.abc import Callable

from runtime_core.bulk_actions._models import RunFilter
from runtime_core.control_plane import ControlPlane
from runtime_core.errors import InvalidArgumentError
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.lifecycle import MAX_PAGE_SIZE, RunListQuery, RunListRow


class TooManyRunsError(InvalidArgumentError):
    code = "too_many_runs"

    def __init__(self, limit: int, what: str) -> None:
        super().__init__(
            f"More than {limit} runs match this {what}; nothing was done.",
            hint=f"Narrow the filter (pipeline, submitted_by, submitted_after / submitted_before) to at most "
            f"{limit} runs per call, or list run_ids.",
        )


def _no_filter() -> InvalidArgumentError:
    return InvalidArgumentError(
        "A bulk action needs run_ids or at least one filter field; nothing was done.",
        hint="Give run_ids, or pipeline / submitted_by / submitted_after / submitted_before.",
    )


def listing_query(run_filter: RunFilter, status: str | None, limit: int, cursor: str | None) -> RunListQuery:
    """The run catalog query of the filter's fields (its run_ids are looked up one by one instead)."""
    return RunListQuery(
        status=status,
        pipeline=run_filter.pipeline,
        submitted_by=run_filter.submitted_by,
        submitted_after=run_filter.submitted_after,
        submitted_before=run_filter.submitted_before,
        limit=limit,
        cursor=cursor,
    )


async def matching_runs(
    control_plane: ControlPlane,
    caller: ExecutionContextSnapshot,
    run_filter: RunFilter,
    *,
    status: str | None,
    keep: Callable[[RunListRow], bool],
    limit: int,
    what: str,
) -> list[RunListRow]:
    """The filter's runs of the caller's tenant with `status` (None: any) that `keep` accepts;
    TooManyRunsError when more than `limit` do."""
    if run_filter.empty:
        raise _no_filter()
    found: list[RunListRow] = []
    cursor: str | None = None
    while True:
        page = await control_plane.list_runs(listing_query(run_filter, status, MAX_PAGE_SIZE, cursor), caller)
        found += [row for row in page.runs if keep(row)]
        if len(found) > limit:
            raise TooManyRunsError(limit, what)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor
