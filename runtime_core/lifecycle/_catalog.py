"""RunCatalog: `runs.list`, the caller's tenant's runs newest first, hot and archived alike.

Owns answering one page of a run listing from two sources kept disjoint by the lifecycle:
runs still in hot state (`HotRows`) and finished runs whose durable RunRecord answers for
them. A page towards older runs (`cursor`) takes each source's first `limit + 1` matches
newest first after the cursor, a page towards newer runs (`prev_cursor`) their first
`limit + 1` oldest first; the page is the `limit` rows next to the cursor of both (a run seen in
both while it is being archived counts once, as archived), newest first, with the cursors of
its neighbours. Also counts the tenant's runs per status under a listing's filters, and
names the failing step of each failed row. The tenant is always the caller's snapshot tenant.
Must not change any state.
"""

from __future__ import annotations

from collections import Counter

from runtime_core.dag import DagStore
from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.instances import RunExecutionIndex
from runtime_core.lifecycle._hot_rows import HotRows, matches
from runtime_core.lifecycle._listing import (
    ListingKey,
    RunListPage,
    RunListQuery,
    RunListRow,
    RunStatusCounts,
    decode_cursor,
    encode_cursor,
    from_epoch_ms,
)
from runtime_core.queueing import SharedRunStore
from runtime_core.storage import DurableStore, RunRecord, RunRecordCursor, RunRecordQuery

HOT_COUNT_LIMIT = 10_000
"""Hot runs counted per status at most; beyond, the counts are lower bounds (`partial`)."""


def _archived_row(record: RunRecord) -> RunListRow:
    return RunListRow(
        shared_run_id=record.shared_run_id,
        pipeline=record.pipeline_name,
        submitted_by=record.submitted_by,
        submit_mode=record.submit_mode,
        submitted_at=record.created_at,
        shared_status=record.shared_status,
        status=record.status,
        local_run_id=record.local_run_id,
        execution_id=record.execution_id,
        failure_reason=record.failure_reason,
        failed_step=next((step.name for step in record.steps if step.failed_the_run), None),
        started_at=record.started_at,
        ended_at=record.ended_at,
        archived=True,
    )


def _record_query(query: RunListQuery, **paging: object) -> RunRecordQuery:
    return RunRecordQuery.model_validate(
        {
            "shared_status": query.shared_status,
            "status": query.status,
            "pipeline_name": query.pipeline,
            "submitted_by": query.submitted_by,
            "created_after": query.submitted_after,
            "created_before": query.submitted_before,
            **paging,
        }
    )


def _cursor(key: ListingKey | None) -> RunRecordCursor | None:
    return RunRecordCursor(created_at=from_epoch_ms(key[0]), shared_run_id=key[1]) if key else None


class RunCatalog:
    def __init__(
        self, runs: SharedRunStore, index: RunExecutionIndex, store: DurableStore | None, executions: DagStore
    ) -> None:
        self.hot = HotRows(runs, index, executions)
        self.store = store

    async def list_runs(self, caller: ExecutionContextSnapshot, query: RunListQuery) -> RunListPage:
        newer = query.prev_cursor is not None
        cursor = query.prev_cursor if newer else query.cursor
        after = decode_cursor(cursor) if cursor else None
        wanted = query.limit + 1
        with restored_snapshot(caller):
            hot = await self._hot_matches(caller.tenant_id, query, after, wanted, newest_first=not newer)
            archived = await self._archived_rows(caller.tenant_id, query, after, wanted, newer=newer)
            unique = {row.shared_run_id: row for row in [*hot, *archived]}  # archived replaces hot
            rows = sorted(unique.values(), key=lambda row: row.key, reverse=not newer)
            more = max(len(rows), len(hot), len(archived)) > query.limit
            page = rows[: query.limit]
            if newer:
                page.reverse()
            page = await self.hot.explain_failures(page)
        older_exist = (more and not newer) or (newer and after is not None)
        newer_exist = (more and newer) or (not newer and after is not None)
        return RunListPage(
            tenant_id=caller.tenant_id,
            runs=page,
            next_cursor=encode_cursor(page[-1].key) if older_exist and page else None,
            prev_cursor=encode_cursor(page[0].key) if newer_exist and page else None,
        )

    async def count_runs(self, caller: ExecutionContextSnapshot, query: RunListQuery) -> RunStatusCounts:
        """The tenant's runs per status under the query's filters (its status filter and cursors aside)."""
        counts: Counter[str] = Counter()
        seen = 0
        with restored_snapshot(caller):
            async for row in self.hot.walk(caller.tenant_id, query, None):
                seen += 1
                if seen > HOT_COUNT_LIMIT:
                    break
                if matches(row, query, ignore_status=True):
                    counts[row.status] += 1
            if self.store is not None:
                counts.update(await self.store.count_run_records(caller.tenant_id, _record_query(query)))
        return RunStatusCounts(counts=dict(counts), partial=seen > HOT_COUNT_LIMIT)

    async def _hot_matches(
        self,
        tenant_id: str,
        query: RunListQuery,
        after: ListingKey | None,
        wanted: int,
        *,
        newest_first: bool,
    ) -> list[RunListRow]:
        rows: list[RunListRow] = []
        async for row in self.hot.walk(tenant_id, query, after, newest_first=newest_first):
            if matches(row, query):
                rows.append(row)
                if len(rows) == wanted:
                    break
        return rows

    async def _archived_rows(
        self, tenant_id: str, query: RunListQuery, after: ListingKey | None, wanted: int, *, newer: bool
    ) -> list[RunListRow]:
        if self.store is None:
            return []
        paging = {"after": _cursor(after), "oldest_first": True} if newer else {"before": _cursor(after)}
        records = await self.store.list_run_records(tenant_id, _record_query(query, limit=wanted, **paging))
        return [_archived_row(record) for record in records]
