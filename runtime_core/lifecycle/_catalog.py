"""RunCatalog: `runs.list`, the caller's tenant's runs newest first, hot and archived alike.

Owns answering one page of a run listing from two sources kept disjoint by the lifecycle:
runs still in hot state (the tenant's shared-run listing in Redis, with the local status of
dispatched ones) and finished runs whose durable RunRecord answers for them. Each source
gives its first `limit + 1` matches after the cursor; the page is the newest `limit` of
both (a run seen in both while it is being archived counts once, as archived). The tenant
is always the caller's snapshot tenant. Must not change any state.
"""

from __future__ import annotations

from runtime_core.identity import ExecutionContextSnapshot, restored_snapshot
from runtime_core.instances import RunExecutionIndex
from runtime_core.lifecycle._listing import (
    ListingKey,
    RunListPage,
    RunListQuery,
    RunListRow,
    decode_cursor,
    encode_cursor,
    from_epoch_ms,
)
from runtime_core.queueing import SharedRunStatus, SharedRunStore, SharedRunSummary
from runtime_core.storage import DurableStore, RunRecord, RunRecordCursor, RunRecordQuery


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
        ended_at=record.ended_at,
        archived=True,
    )


def _matches(row: RunListRow, query: RunListQuery) -> bool:
    wanted = (
        (query.shared_status, row.shared_status),
        (query.status, row.status),
        (query.pipeline, row.pipeline),
        (query.submitted_by, row.submitted_by),
    )
    return all(expected is None or expected == actual for expected, actual in wanted)


class RunCatalog:
    def __init__(self, runs: SharedRunStore, index: RunExecutionIndex, store: DurableStore | None) -> None:
        self.runs = runs
        self.index = index
        self.store = store

    async def list_runs(self, caller: ExecutionContextSnapshot, query: RunListQuery) -> RunListPage:
        after = decode_cursor(query.cursor) if query.cursor else None
        wanted = query.limit + 1
        with restored_snapshot(caller):
            hot = await self._hot_rows(caller.tenant_id, query, after, wanted)
            archived = await self._archived_rows(caller.tenant_id, query, after, wanted)
        unique = {row.shared_run_id: row for row in [*hot, *archived]}  # archived replaces hot
        rows = sorted(unique.values(), key=lambda row: row.key, reverse=True)
        page = rows[: query.limit]
        more = max(len(rows), len(hot), len(archived)) > query.limit
        return RunListPage(
            tenant_id=caller.tenant_id,
            runs=page,
            next_cursor=encode_cursor(page[-1].key) if more and page else None,
        )

    # Runs still in hot state

    async def _hot_rows(
        self, tenant_id: str, query: RunListQuery, after: ListingKey | None, wanted: int
    ) -> list[RunListRow]:
        start = self._start(query, after)
        oldest_ms = query.after_ms()
        rows: list[RunListRow] = []
        async for batch in self.runs.tenant_summaries(tenant_id, after=start):
            for row in await self._rows_of(tenant_id, batch):
                if oldest_ms is not None and row.key[0] < oldest_ms:
                    return rows
                if _matches(row, query):
                    rows.append(row)
                    if len(rows) == wanted:
                        return rows
        return rows

    @staticmethod
    def _start(query: RunListQuery, after: ListingKey | None) -> ListingKey | None:
        """Continue after the cursor, or after the `submitted_before` bound when that is further on."""
        before_ms = query.before_ms()
        bound = (before_ms, "") if before_ms is not None else None  # keys strictly below: earlier ms
        candidates = [key for key in (after, bound) if key is not None]
        return min(candidates) if candidates else None

    async def _rows_of(self, tenant_id: str, batch: list[SharedRunSummary]) -> list[RunListRow]:
        dispatched = [s.local_run_id for s in batch if s.local_run_id]
        locals_ = await self.index.get_many_local(dispatched)
        rows = []
        for summary in batch:
            if summary.tenant_id != tenant_id:
                continue  # never another tenant's run, whatever the listing key holds
            local = locals_.get(summary.local_run_id or "")
            status = summary.status.value
            if summary.status is SharedRunStatus.DISPATCHED and local is not None:
                status = local.status.value
            rows.append(
                RunListRow(
                    shared_run_id=summary.shared_run_id,
                    pipeline=summary.pipeline_name,
                    submitted_by=summary.submitted_by,
                    submit_mode=summary.submit_mode.value,
                    submitted_at=from_epoch_ms(summary.created_at_ms),
                    shared_status=summary.status.value,
                    status=status,
                    local_run_id=summary.local_run_id,
                    execution_id=local.execution_id if local else None,
                    failure_reason=(local.failure_reason if local else None) or summary.failure_reason,
                    ended_at=from_epoch_ms(local.completed_at_ms)
                    if local and local.completed_at_ms
                    else None,
                    archived=False,
                )
            )
        return rows

    # Finished runs in the durable store

    async def _archived_rows(
        self, tenant_id: str, query: RunListQuery, after: ListingKey | None, wanted: int
    ) -> list[RunListRow]:
        if self.store is None:
            return []
        cursor = (
            RunRecordCursor(created_at=from_epoch_ms(after[0]), shared_run_id=after[1]) if after else None
        )
        records = await self.store.list_run_records(
            tenant_id,
            RunRecordQuery(
                shared_status=query.shared_status,
                status=query.status,
                pipeline_name=query.pipeline,
                submitted_by=query.submitted_by,
                created_after=query.submitted_after,
                created_before=query.submitted_before,
                before=cursor,
                limit=wanted,
            ),
        )
        return [_archived_row(record) for record in records]
