"""Calls in flight when Redis lost its dataset are still never repeated silently (issue 31.3).

Redis restarted WITHOUT persistence (every key gone, the operation records too) while two runs
are in the middle of a `tool.http` POST (each effect applied at the loopback peer, no answer
yet). Their runtime instance restores each execution from its durable copy; the operation id
each call recorded is put back from the durable ledger (`step.operation_started` is written
before the call), so the step's next attempt finds the call uncertain: the plain POST (no
declared policy: fail) fails with code `uncertain` and the peer sees one call; the POST to the
endpoint deduplicating by Idempotency-Key (`retry`) is sent again with the same key and applies
its effect once. The recovery report lists both runs as restored, with their settled calls.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime_core.bootstrap import RuntimeServices, RuntimeSettings
from runtime_core.control_plane import ControlPlaneSettings, RunStatusView, run_is_done
from runtime_core.errors import NotFoundError, StoreUnavailableError
from runtime_core.hot_state import EmbeddedRedis
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from runtime_core.recovery import RecoveryReport, RecoveryReports
from tests.helpers import restart_empty, wait_until
from tests.integration.control_plane_support import DEFAULT_TENANT
from tests.loopback import serving
from tests.side_effect_peer import SideEffectPeer

BOUND_S = 60.0


def post_pipeline(name: str, url: str, **config: object) -> dict[str, object]:
    return {
        "name": name,
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {
                "name": "post",
                "stepKey": "tool.http",
                "dependsOn": ["a"],
                "input": {"order": "state.order"},
                "config": {"method": "POST", "url": url, **config},
            },
        ],
    }


@dataclass
class Lost:
    views: dict[str, RunStatusView]
    peer: SideEffectPeer
    report: RecoveryReport


def _settings(data_dir: Path, url: str) -> RuntimeSettings:
    return RuntimeSettings(
        redis_url=url,
        redis_prefix=f"lostops{secrets.token_hex(4)}:",
        data_dir=data_dir,
        control_plane=ControlPlaneSettings(
            host="lostopshost",
            local_instances=1,
            workers_per_instance=4,
            max_concurrent_runs_per_instance=4,
            heartbeat_interval_ms=100,
            health_check_interval_ms=100,
            pump_idle_interval_ms=20,
            lost_run_requeue_grace_ms=500,
        ),
    )


@pytest.fixture(scope="module")
async def lost(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Lost]:
    data_dir = Path(tmp_path_factory.mktemp("lost-operations"))
    server = EmbeddedRedis(data_dir / "redis", appendonly=False).start()
    peer = SideEffectPeer()
    peer.hold = True
    try:
        async with (
            serving(peer.app()) as peer_url,
            RuntimeServices(_settings(data_dir, server.url)) as services,
        ):
            plane = services.control_plane
            pipelines = {
                "plain": post_pipeline("plain-post", f"{peer_url}/effects"),
                "idempotent": post_pipeline(
                    "keyed-post", f"{peer_url}/effects/idempotent", onUncertain="retry"
                ),
            }
            runs = {
                name: (
                    await plane.submit(
                        parse_pipeline(p), {"order": name}, SubmitMode.QUEUE_FIRST, DEFAULT_TENANT
                    )
                ).shared_run_id
                for name, p in pipelines.items()
            }

            async def both_held() -> bool:
                return sum(peer.calls.values()) == 2

            await wait_until(both_held, timeout=BOUND_S, interval=0.05)
            server = restart_empty(server)
            peer.hold = False
            peer.release()
            views: dict[str, RunStatusView] = {}

            async def all_ended() -> bool:
                try:
                    views.update({n: await plane.run_status(s, DEFAULT_TENANT) for n, s in runs.items()})
                except (StoreUnavailableError, NotFoundError):  # until its instance restored it
                    return False
                return all(run_is_done(view) for view in views.values())

            await wait_until(all_ended, timeout=BOUND_S, interval=0.1)
            await services.audit.ledger.flush()
            report = await RecoveryReports(services.audit.queries).report(DEFAULT_TENANT)
            yield Lost(views, peer, report)
    finally:
        server.stop()


def test_the_plain_post_is_not_called_again_and_fails_uncertain(lost: Lost) -> None:
    view = lost.views["plain"]
    assert view.local_status == "Failed", view
    [step] = [s for s in view.steps if s.name == "post"]
    assert step.last_error is not None and step.last_error.code == "uncertain"
    plain_keys = [
        key for key, calls in lost.peer.calls.items() if lost.peer.results[key]["body"] == {"order": "plain"}
    ]
    assert [lost.peer.calls[key] for key in plain_keys] == [1]


def test_the_keyed_post_is_sent_again_with_the_same_key_and_applies_its_effect_once(lost: Lost) -> None:
    assert lost.views["idempotent"].local_status == "Completed"
    [key] = [k for k, r in lost.peer.results.items() if r["body"] == {"order": "idempotent"}]
    assert (lost.peer.calls[key], lost.peer.effects[key]) == (2, 1)


def test_the_recovery_report_lists_both_runs_restored_with_their_settled_calls(lost: Lost) -> None:
    [incident] = lost.report.incidents
    assert incident.cause == "hot_state_lost"
    settled = {
        run.shared_run_id: (run.outcome.value, [(op.step, op.policy, op.settled_by) for op in run.uncertain])
        for run in incident.runs
    }
    assert sorted(settled.values()) == [
        ("restored", [("post", "fail", "failed")]),
        ("restored", [("post", "retry", "retried")]),
    ]
