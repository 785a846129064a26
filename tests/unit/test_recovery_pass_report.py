"""A recovery pass reports itself (issue 31.5): one `recovery.report` structured log event per tenant
it touched, with the runs, the count per action, the calls left uncertain and the time from the
incarnation's death to now; the tenant's ledger entry carries the same fields (the crash test
tests/integration/test_side_effects_crash.py reads it back)."""

from __future__ import annotations

import logging

import pytest

from runtime_core.recovery import RecoveredItem, RecoveryAction, RecoveryCause, RecoveryEvidence, RecoveryKind


def _item(tenant: str, action: RecoveryAction, uncertain: int = 0) -> RecoveredItem:
    return RecoveredItem(
        runtime_instance_id="rt_dead",
        incarnation="inc_1",
        tenant_id=tenant,
        kind=RecoveryKind.IN_FLIGHT_EXECUTION,
        action=action,
        local_run_id=f"lrun_{tenant}_{action.value}",
        shared_run_id=f"srun_{tenant}_{action.value}",
        execution_id=f"exec_{tenant}_{action.value}",
        cause=RecoveryCause.INSTANCE_LOST,
        dead_since_ms=1_000,
        uncertain_operations=[
            {"step": f"s{n}", "operation": "call", "operation_id": f"op_{n}", "state": "started"}
            for n in range(uncertain)
        ],
    )


async def test_a_pass_logs_one_report_event_per_tenant_with_counts_and_timing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    items = [
        _item("tenant-a", RecoveryAction.REQUEUED_FOR_RESUME, uncertain=2),
        _item("tenant-a", RecoveryAction.ABANDONED),
        _item("tenant-b", RecoveryAction.REQUEUED_FOR_REDISPATCH),
    ]
    with caplog.at_level(logging.WARNING, logger="runtime_core.recovery"):
        await RecoveryEvidence().report_pass("rt_dead", items, now_ms=4_500)

    reports = {r.tenant_id: r for r in caplog.records if r.getMessage().startswith("recovery.report")}  # type: ignore[attr-defined]
    assert sorted(reports) == ["tenant-a", "tenant-b"]
    a = reports["tenant-a"]
    assert a.counts == {"requeued_for_resume": 1, "abandoned": 1, "runs": 2, "uncertain": 2}  # type: ignore[attr-defined]
    assert a.recovery_ms == 3_500 and a.cause == "instance_lost"  # type: ignore[attr-defined]
    assert {run["shared_run_id"] for run in a.runs} == {  # type: ignore[attr-defined]
        "srun_tenant-a_requeued_for_resume",
        "srun_tenant-a_abandoned",
    }
    assert "tenant-b" not in str(a.runs)  # type: ignore[attr-defined]
