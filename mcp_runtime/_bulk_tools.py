"""Tools `runs.failed`, `runs.retry` and `runs.cancel`: dead letters and bulk actions.

Owns turning the filter arguments into a RunFilter and shaping the answers (each run's
outcome, counted). Must not look runs up or act on them: `BulkRunActions` does, through the
ControlPlane, tenant-checked.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from mcp_runtime._bulk_io import BulkActionOutput, FailedRunsInput, FailedRunsOutput, RunFilterInput
from mcp_runtime._registration import ToolCall, ToolSpec
from runtime_core.bulk_actions import BulkRunActions, RunActionResult, RunFilter
from runtime_core.errors import ConfigurationError, InvalidArgumentError

_FILTER_HELP = (
    "Choose runs by `run_ids`, or by filter fields (pipeline, submitted_by, submitted_after, "
    "submitted_before; at least one)."
)


def run_filter(request: RunFilterInput) -> RunFilter:
    try:
        run_ids = request.run_ids_checked()
    except ValueError as exc:
        raise InvalidArgumentError(
            str(exc), hint="Pass run ids as run.status or runs.list show them."
        ) from None
    return RunFilter(
        run_ids=run_ids,
        pipeline=request.pipeline,
        submitted_by=request.submitted_by,
        submitted_after=request.submitted_after,
        submitted_before=request.submitted_before,
    )


def _answer(call: ToolCall, results: list[RunActionResult]) -> BulkActionOutput:
    counts = Counter(result.outcome.value for result in results)
    return BulkActionOutput(tenant_id=call.snapshot.tenant_id, runs=results, counts=dict(counts))


class BulkTools:
    def __init__(self, bulk: BulkRunActions | None) -> None:
        self._service = bulk

    @property
    def _bulk(self) -> BulkRunActions:
        if self._service is None:
            raise ConfigurationError(
                "Bulk run actions are not available in this server.",
                hint="Serve the control plane with its durable store (mcp-runtime serve).",
            )
        return self._service

    async def failed(self, request: FailedRunsInput, call: ToolCall) -> FailedRunsOutput:
        runs, cursor = await self._bulk.failed.list(
            call.snapshot, run_filter(request), limit=request.limit, cursor=request.cursor
        )
        return FailedRunsOutput(tenant_id=call.snapshot.tenant_id, runs=runs, next_cursor=cursor)

    async def retry(self, request: RunFilterInput, call: ToolCall) -> BulkActionOutput:
        return _answer(call, await self._bulk.retry(call.snapshot, run_filter(request)))

    async def cancel(self, request: RunFilterInput, call: ToolCall) -> BulkActionOutput:
        return _answer(call, await self._bulk.cancel(call.snapshot, run_filter(request)))

    def specs(self) -> list[ToolSpec[Any, Any]]:
        limit = "more than the server's per-call limit (MCP_RUNTIME_BULK_MAX_RUNS, default 100)"
        return [
            ToolSpec(
                name="runs.failed",
                title="Failed runs (dead letters)",
                description=(
                    "Your tenant's runs that failed after their retries, newest first: the step that failed "
                    "each, its last error, its attempts (time, code, message, whether a retry followed) and "
                    "the run that retried it, if any. Filter by run_ids, pipeline, submitted_by or submit "
                    "time; page with `cursor`."
                ),
                input_model=FailedRunsInput,
                output_model=FailedRunsOutput,
                handler=self.failed,
                read_only=True,
                idempotent=True,
            ),
            ToolSpec(
                name="runs.retry",
                title="Retry failed runs",
                description=(
                    "Start a new run with the same pipeline, input and priority for each failed run chosen, "
                    "linked to it in both ledgers (the new run's snapshot attribute retry.of, the "
                    "original's shared_run.retried entry). Repeating the call returns the same new runs "
                    f"(already_retried). Runs not failed are answered not_failed. {_FILTER_HELP} Refuses "
                    f"{limit} and then does nothing."
                ),
                input_model=RunFilterInput,
                output_model=BulkActionOutput,
                handler=self.retry,
                read_only=False,
                idempotent=True,
            ),
            ToolSpec(
                name="runs.cancel",
                title="Cancel runs in bulk",
                description=(
                    "Cancel each chosen run of your tenant as `cancel` does; with filter fields, runs not "
                    "finished yet. Answers per run: cancelled, already_finished, not_found or busy "
                    "(still being dispatched after a few seconds: repeat the call); a repeated "
                    f"call finds nothing left to cancel. {_FILTER_HELP} Refuses {limit} and then does "
                    "nothing."
                ),
                input_model=RunFilterInput,
                output_model=BulkActionOutput,
                handler=self.cancel,
                read_only=False,
                destructive=True,
                idempotent=True,
            ),
        ]
