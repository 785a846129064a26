"""The `run://{run_id}` resource URI: one run of the caller's tenant, by any of its ids.

Owns building and parsing run URIs and the URIs a run event concerns (its SharedRunId,
LocalRunId and ExecutionId), so a subscription to any of a run's ids hears it. Must not
look runs up.
"""

from __future__ import annotations

from runtime_core.events import RunEvent

RUN_URI_SCHEME = "run://"
RUN_URI_TEMPLATE = RUN_URI_SCHEME + "{run_id}"


def run_uri(run_id: str) -> str:
    return RUN_URI_SCHEME + run_id


def parse_run_uri(uri: str) -> str | None:
    """The run id of a `run://` URI, or None for any other URI."""
    if not uri.startswith(RUN_URI_SCHEME):
        return None
    run_id = uri.removeprefix(RUN_URI_SCHEME)
    return run_id if run_id and "/" not in run_id else None


def event_uris(event: RunEvent) -> list[str]:
    ids = (event.shared_run_id, event.local_run_id, event.execution_id)
    return [run_uri(run_id) for run_id in ids if run_id]
