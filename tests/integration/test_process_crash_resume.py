"""A SIGKILLed runtime-instance process's in-flight execution resumes on its replacement at
once, with a control plane whose engine lease differs from the lease its children claim with
(they run the default engine settings): recovery releases the dead claims by the claim time
recorded with each claim, never by a lease the two sides would have to agree on. The resumed
execution's ledger entries name the replacement's LocalRunId, the dead attempt's keep theirs.
Reuses the process scaffolding of `crash_isolation_scenario` (one tenant, HTTP transport).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from runtime_core.bootstrap import RuntimeSettings
from runtime_core.dag import EngineSettings
from runtime_core.hot_state import EmbeddedRedis, connect_hot_state
from runtime_core.instances import HostTransport, LocalRunStatus
from runtime_core.queueing import SubmitMode
from runtime_core.storage import SqliteDurableStore
from tests.helpers import wait_until
from tests.integration import crash_isolation_scenario as scenario
from tests.integration.control_plane_support import TENANT_A

CONTROL_PLANE_LEASE_MS = 1_000  # far below the children's default lease
RESUME_TIMEOUT_S = 20  # well under the children's lease: resuming must not wait for it to lapse
POST_THRESHOLD = ("post-1", "post-2", "finish")


async def test_killed_process_execution_resumes_without_waiting_for_the_childrens_lease(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    children_lease_ms = RuntimeSettings().engine.lease_ms
    assert children_lease_ms >= 3 * RESUME_TIMEOUT_S * 1_000 > CONTROL_PLANE_LEASE_MS
    hot_state = connect_hot_state(redis_server.url, prefix=f"lease{secrets.token_hex(4)}:")
    durable = await SqliteDurableStore.open(tmp_path / "runtime.db")
    plane, audit = scenario.build_plane(
        hot_state,
        durable,
        redis_server.url,
        tmp_path,
        engine_settings=EngineSettings(lease_ms=CONTROL_PLANE_LEASE_MS),
        background_pump=True,
    )
    gate = tmp_path / "gate"
    try:
        await plane.start()
        manager = scenario.hosts(plane)
        dead = await manager.start_host(scenario.tenant_launch(HostTransport.HTTP, "tenant-a"))
        submitted = await plane.submit(scenario.PROOF, {"gate": str(gate)}, SubmitMode.QUEUE_FIRST, TENANT_A)

        async def held() -> scenario.InFlight | None:
            return await scenario.held_at_threshold(plane, submitted.shared_run_id)

        await wait_until(held, timeout=RESUME_TIMEOUT_S, interval=0.05)
        run = await held()
        assert run is not None
        work = scenario.TenantWork(TENANT_A, gate, dead)

        async def durable_before_crash() -> bool:
            completed = await scenario.completed_steps_in_ledger(audit, work, run.execution_id)
            return completed == sorted(scenario.BEFORE_THRESHOLD)

        await wait_until(durable_before_crash, timeout=RESUME_TIMEOUT_S, interval=0.05)
        assert await manager.kill_host(dead.host_id) == -9
        gate.touch()

        async def completed() -> bool:
            record = await plane.parts.index.get_by_shared(submitted.shared_run_id)
            return record is not None and record.status is LocalRunStatus.COMPLETED

        await wait_until(completed, timeout=RESUME_TIMEOUT_S, interval=0.05)

        final = await scenario.latest(plane, submitted.shared_run_id)
        steps = {s.name: s for s in (await scenario.live_view(plane, run.execution_id)).steps}
        assert final.execution_id == run.execution_id and final.local_run_id != run.local_run_id
        assert final.runtime_instance_id != dead.runtime_instance_ids[0]
        assert (steps[scenario.THRESHOLD].recovery_count, steps[scenario.THRESHOLD].retry_count) == (1, 0)

        entries = await audit.queries.ledger(TENANT_A, execution_id=run.execution_id, limit=10_000)
        completed_by = {e.step_name: e.local_run_id for e in entries if e.event == "step.completed"}
        assert completed_by == {
            **dict.fromkeys(scenario.BEFORE_THRESHOLD, run.local_run_id),
            **dict.fromkeys((scenario.THRESHOLD, *POST_THRESHOLD), final.local_run_id),
        }
        [reassigned] = [e for e in entries if e.event == "execution.reassigned"]
        assert reassigned.local_run_id == final.local_run_id
        assert reassigned.attributes["previous"]["local_run_id"] == run.local_run_id
    finally:
        await plane.stop()
        await audit.close()
        await durable.close()
        await hot_state.close()
    assert scenario.hosting_processes(hot_state.prefix) == []
