"""Operations in doubt after a lost dataset: put back what the durable ledger says was started.

Owns reading a restored execution's durable ledger for the calls to peers its steps began
(`step.operation_started`, written before each call) and recording each one again for every
step that is not Completed in the restored execution, so the step's next claim finds the call
uncertain and its policy settles it: a call whose record was lost with Redis is never repeated
silently. Must not call peers nor decide policies.
"""

from __future__ import annotations

from runtime_core.dag import DagStore, restore_operation
from runtime_core.storage import DurableStore

STARTED_EVENT = "step.operation_started"
_LEDGER_LIMIT = 100_000


async def put_back_operations(
    dag_store: DagStore, store: DurableStore, tenant_id: str, execution_id: str
) -> list[dict[str, str]]:
    """`{step, operation, operation_id}` for every operation recorded again (the latest started
    per step and operation name, for steps not Completed in the restored execution)."""
    view = await dag_store.read_execution(execution_id)
    if view is None:
        return []
    unfinished = {step.name for step in view.steps if step.status != "Completed"}
    latest: dict[tuple[str, str], tuple[str, int, int]] = {}
    for entry in await store.list_ledger(tenant_id, execution_id=execution_id, limit=_LEDGER_LIMIT):
        if entry.event != STARTED_EVENT or entry.step_name not in unfinished:
            continue
        name = str(entry.attributes.get("operation", ""))
        started_ms = int(entry.recorded_at.timestamp() * 1000)
        attempt = int(entry.attributes.get("attempt", 1))
        latest[(entry.step_name, name)] = (str(entry.attributes.get("operation_id", "")), attempt, started_ms)
    restored = []
    for (step_name, name), (operation_id, attempt, started_ms) in sorted(latest.items()):
        if operation_id and await restore_operation(
            dag_store, execution_id, step_name, name, operation_id, attempts=attempt, started_at_ms=started_ms
        ):
            restored.append({"step": step_name, "operation": name, "operation_id": operation_id})
    return restored
