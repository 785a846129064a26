"""Releasing the steps an Unsafe instance left Running in an in-flight execution.

Owns the typed wrapper of `release_execution_claims` (the only place that knows its
KEYS/ARGV order): steps claimed before the instance was marked Unsafe (by the claim time the
claim scripts record, so the dead process's lease setting does not matter) go back to Ready
at once, tokens cleared, retry counts untouched, recoveries counted, so the resumed
execution does not wait for their leases; the dead local run stops owning the execution, so
its workers (a zombie's) are refused every further claim. Must not touch Completed steps or a
replacement's claims.
"""

from __future__ import annotations

from runtime_core.dag import DagStore


async def release_execution_claims(
    dag_store: DagStore, execution_id: str, *, claimed_before_ms: int, dead_local_run_id: str = ""
) -> list[str]:
    """The released step names (none when the execution is not Running)."""
    k = dag_store.keys(execution_id)
    reply = await dag_store.hot_state.scripts["release_execution_claims"](
        keys=[k.meta, k.status, k.ready, k.running, k.token, k.recoveries, k.claimed],
        args=[claimed_before_ms, dead_local_run_id],
    )
    return [str(name) for name in reply[1:]]
