"""Side effects that survive a SIGKILL (issues 31.1 and 31.3), over real processes: a control plane
in this process, a runtime-instance process started by its host manager, the example MCP server
(streamable HTTP, and stdio started by the runtime instance itself) and a loopback HTTP peer.

Three runs are held in the middle of their calls (every call's effect applied, no answer yet)
when the runtime-instance process is SIGKILLed; recovery resumes them on a replacement process
with the same ExecutionIds:
- `idempotent`: a ticket over HTTP MCP, a ticket over stdio MCP, a charge to an HTTP endpoint
  deduplicating by Idempotency-Key, all `retry`: the run completes, each effect applied once;
- `one-shot`: a mail (MCP) and a POST to a plain endpoint, no policy declared (so `fail`): the
  run fails with code `uncertain`, neither peer is called twice;
- `ask`: a mail with `onUncertain: ask`: the run parks until a human answers `done`, then
  completes; the peer is called once.
The ledger tells each story; `recovery.report` lists the three runs with how their uncertain
calls were settled.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from mcp_runtime import DEFAULT_PIPELINES_DIR, Principal, ToolBackend
from runtime_core.audit import AuditServices
from runtime_core.control import ExecutionControlService
from runtime_core.control_plane import ControlPlane
from runtime_core.hot_state import EmbeddedRedis, connect_hot_state
from runtime_core.instances import HostLaunch, HostTransport, LocalRunStatus
from runtime_core.pipeline import PipelineCatalog, parse_pipeline
from runtime_core.queueing import SubmitMode
from runtime_core.recovery import RecoveryReport, RecoveryReports
from runtime_core.steps import StepProviders, default_executor_registry, load_provider_settings
from runtime_core.storage import LedgerEntry, SqliteDurableStore
from tests.helpers import wait_until
from tests.integration import crash_isolation_scenario as scenario
from tests.integration.control_plane_support import TENANT_A, TENANT_B
from tests.loopback import serving
from tests.mcp_tool_server import Effects, http_entry, side_effects_server, stdio_entry
from tests.reliability.mcp_rig import held_session, ok, server_for
from tests.side_effect_peer import SideEffectPeer

TIMEOUT_S = 60
TENANTS = {
    "tenant-a": {
        "isolationMode": "Dedicated",
        "preferDedicatedCapacity": True,
        "allowSharedFallback": False,
        "maxRuntimeInstances": 1,
        "runtimeInstanceIdPrefix": "tenant-a-runtime",
        "workerCountPerInstance": 8,
        "maxConcurrentRunsPerInstance": 3,
        "maxLocalWorkersPerExecution": 3,
    }
}
HELD = {"title": "state.title", "hold_until": "state.gate"}


def mcp_step(name: str, server: str, tool: str, step_input: dict[str, Any], **config: Any) -> dict[str, Any]:
    return {
        "name": name,
        "stepKey": "mcp.tool",
        "input": step_input,
        "config": {"server": server, "tool": tool, **config},
    }


def http_step(name: str, url: str, **config: Any) -> dict[str, Any]:
    return {
        "name": name,
        "stepKey": "tool.http",
        "input": {"order": "state.title"},
        "config": {"method": "POST", "url": url, **config},
    }


def pipelines(peer_url: str) -> dict[str, dict[str, Any]]:
    mail = {"to": "state.to", "subject": "state.title", "hold_until": "state.gate"}
    return {
        "idempotent": {
            "name": "idempotent-effects",
            "steps": [
                mcp_step("ticket-http", "tickets", "create_ticket", HELD),
                mcp_step("ticket-stdio", "local", "create_ticket", HELD),
                http_step("charge", f"{peer_url}/effects/idempotent", onUncertain="retry"),
                {
                    "name": "done",
                    "stepKey": "test.noop",
                    "dependsOn": ["ticket-http", "ticket-stdio", "charge"],
                },
            ],
        },
        "one-shot": {
            "name": "one-shot-effects",
            "steps": [mcp_step("mail", "mail", "send_email", mail), http_step("post", f"{peer_url}/effects")],
        },
        "ask": {
            "name": "asked-effects",
            "steps": [mcp_step("mail", "mail", "send_email", mail, onUncertain="ask")],
        },
    }


@dataclass
class CrashProof:
    plane: ControlPlane
    audit: AuditServices
    effects: Effects
    peer: SideEffectPeer
    runs: dict[str, str]  # name -> shared run id
    held: dict[str, Any]  # name -> run index record when killed
    final: dict[str, Any] = field(default_factory=dict)
    ledgers: dict[str, list[LedgerEntry]] = field(default_factory=dict)
    leaked_pids: list[int] = field(default_factory=list)
    reports: dict[str, RecoveryReport] = field(default_factory=dict)  # tenant -> report
    pass_reports: list[LedgerEntry] = field(default_factory=list)

    def operation_of(self, run: str, step: str) -> str:
        [started] = {
            e.attributes["operation_id"]
            for e in self.ledgers[run]
            if e.event == "step.operation_started" and e.step_name == step
        }
        return started


def providers_file(data_dir: Path, mcp_url: str, effects_file: Path) -> Path:
    servers = {
        "tickets": http_entry(mcp_url, idempotent=True, allowed_tools=["create_ticket"]),
        "local": stdio_entry(effects_file, idempotent=True),
        "mail": http_entry(mcp_url, allowed_tools=["send_email"]),
    }
    path = data_dir / "providers.json"
    path.write_text(json.dumps({"mcp_servers": {"tenant-a": servers}}))
    return path


async def all_calls_held(effects: Effects, peer: SideEffectPeer) -> bool:
    tickets, mails = effects.effects("create_ticket"), effects.effects("send_email")
    return sum(tickets.values()) == 2 and sum(mails.values()) == 2 and sum(peer.calls.values()) == 2


async def run_status(plane: ControlPlane, shared_run_id: str) -> LocalRunStatus:
    return (await scenario.latest(plane, shared_run_id)).status


async def answer_when_parked(
    plane: ControlPlane, control: ExecutionControlService, shared_run_id: str
) -> None:
    """The `ask` run parks on its replacement; a human says the mail went out."""
    record = await scenario.latest(plane, shared_run_id)
    assert record.execution_id is not None

    async def parked() -> bool:
        state = await control.get(record.execution_id, TENANT_A)
        return state.waiting_key == "mail.uncertain"

    await wait_until(parked, timeout=TIMEOUT_S, interval=0.1)
    answer = {
        "decision": "done",
        "result": {"delivered": True, "checked": "outbox"},
        "comment": "seen in the outbox",
    }
    await control.submit_input(record.execution_id, "mail.uncertain", answer, TENANT_A)


@pytest.fixture(scope="module")
async def proof(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[CrashProof]:
    data_dir = tmp_path_factory.mktemp("side-effects-crash")
    gate, effects = data_dir / "gate", Effects(data_dir / "effects.jsonl")
    hot_state = connect_hot_state(redis_server.url, prefix=f"sfx{secrets.token_hex(4)}:")
    durable = await SqliteDurableStore.open(data_dir / "runtime.db")
    peer = SideEffectPeer()
    peer.hold = True
    async with serving(peer.app()) as peer_url, side_effects_server(effects.path) as mcp_url:
        providers = StepProviders.build(
            load_provider_settings(providers_file(data_dir, mcp_url, effects.path))
        )
        plane, audit = scenario.build_plane(
            hot_state,
            durable,
            redis_server.url,
            data_dir,
            tenants=TENANTS,
            providers_file=data_dir / "providers.json",
            executors=default_executor_registry(providers=providers),
            background_pump=True,
        )
        control = ExecutionControlService(hot_state)
        try:
            await plane.start()
            manager = scenario.hosts(plane)
            launch = HostLaunch.for_tenant(
                HostTransport.HTTP, plane.parts.tenants.resolve("tenant-a"), TENANT_A
            )
            dead = await manager.start_host(launch)
            state = {"title": "crash-test", "to": "ops@example.com", "gate": str(gate)}
            runs = {
                name: (
                    await plane.submit(parse_pipeline(p), state, SubmitMode.QUEUE_FIRST, TENANT_A)
                ).shared_run_id
                for name, p in pipelines(peer_url).items()
            }
            await wait_until(lambda: all_calls_held(effects, peer), timeout=TIMEOUT_S, interval=0.05)
            held = {name: await scenario.latest(plane, srun) for name, srun in runs.items()}
            assert await manager.kill_host(dead.host_id) == -9
            peer.hold = False
            peer.release()
            gate.touch()
            await answer_when_parked(plane, control, runs["ask"])

            async def settled() -> bool:
                statuses = [await run_status(plane, srun) for srun in runs.values()]
                return all(status.is_terminal for status in statuses)

            await wait_until(settled, timeout=TIMEOUT_S, interval=0.1)
            proof = CrashProof(plane, audit, effects, peer, runs, held)
            for name, srun in runs.items():
                proof.final[name] = await scenario.latest(plane, srun)
                execution_id = proof.final[name].execution_id
                proof.ledgers[name] = await audit.queries.ledger(
                    TENANT_A, execution_id=execution_id, limit=10_000
                )
            reports = RecoveryReports(audit.queries)
            proof.reports = {s.tenant_id: await reports.report(s) for s in (TENANT_A, TENANT_B)}
            everything = await audit.queries.ledger(TENANT_A, limit=10_000)
            proof.pass_reports = [e for e in everything if e.event == "recovery.report"]
        finally:
            await plane.stop()
            await providers.aclose()
        proof.leaked_pids = scenario.hosting_processes(hot_state.prefix)
        try:
            yield proof
        finally:
            await audit.close()
            await durable.close()
            await hot_state.close()


def events(proof: CrashProof, run: str, name: str) -> list[LedgerEntry]:
    return [e for e in proof.ledgers[run] if e.event == name]


def test_every_run_continued_on_a_replacement_with_its_execution_id(proof: CrashProof) -> None:
    for name in proof.runs:
        held, final = proof.held[name], proof.final[name]
        assert final.execution_id == held.execution_id
        assert (
            final.local_run_id != held.local_run_id and final.runtime_instance_id != held.runtime_instance_id
        )
    assert {name: final.status for name, final in proof.final.items()} == {
        "idempotent": LocalRunStatus.COMPLETED,
        "one-shot": LocalRunStatus.FAILED,
        "ask": LocalRunStatus.COMPLETED,
    }
    assert proof.leaked_pids == []


def test_idempotent_peers_were_called_again_with_the_same_operation_id_and_applied_each_effect_once(
    proof: CrashProof,
) -> None:
    tickets = proof.effects.effects("create_ticket")
    ticket_calls = proof.effects.calls("create_ticket")
    for step in ("ticket-http", "ticket-stdio"):
        operation_id = proof.operation_of("idempotent", step)
        assert (tickets[operation_id], ticket_calls[operation_id]) == (1, 2), step
    charge = proof.operation_of("idempotent", "charge")
    assert (proof.peer.effects[charge], proof.peer.calls[charge]) == (1, 2)


def test_non_idempotent_peers_follow_the_declared_policy_and_are_never_called_twice(
    proof: CrashProof,
) -> None:
    mails = proof.effects.calls("send_email")
    one_shot_mail, asked_mail = proof.operation_of("one-shot", "mail"), proof.operation_of("ask", "mail")
    post = proof.operation_of("one-shot", "post")
    assert (mails[one_shot_mail], mails[asked_mail], proof.peer.calls[post]) == (1, 1, 1)
    failed = {e.step_name: e.attributes["code"] for e in events(proof, "one-shot", "step.failed")}
    assert failed == {"mail": "uncertain", "post": "uncertain"}


def test_the_ledger_tells_the_story_of_each_uncertain_call(proof: CrashProof) -> None:
    def story(run: str) -> dict[str, tuple[str, str]]:
        uncertain = {
            e.step_name: e.attributes["policy"] for e in events(proof, run, "step.operation_uncertain")
        }
        settled = {
            e.step_name: e.attributes["settled_by"] for e in events(proof, run, "step.operation_settled")
        }
        assert set(uncertain) == set(settled), run
        return {step: (uncertain[step], settled[step]) for step in uncertain}

    assert story("idempotent") == dict.fromkeys(
        ("ticket-http", "ticket-stdio", "charge"), ("retry", "retried")
    )
    assert story("one-shot") == {"mail": ("fail", "failed"), "post": ("fail", "failed")}
    assert story("ask") == {"mail": ("ask", "human_done")}
    for run in proof.runs:
        [recovered] = [e for e in proof.ledgers[run] if e.event.startswith("runtime.recovery.")]
        assert recovered.attributes["kind"] == "InFlightExecution"
        uncertain_at_recovery = {op["step"] for op in recovered.attributes["uncertain_operations"]}
        assert uncertain_at_recovery == {e.step_name for e in events(proof, run, "step.operation_uncertain")}
    completed = {e.step_name for e in events(proof, "ask", "step.completed")}
    assert completed == {"mail"}


def test_the_recovery_report_lists_each_run_and_how_its_uncertain_calls_were_settled(
    proof: CrashProof,
) -> None:
    report = proof.reports["tenant-a"]
    [incident] = report.incidents
    assert incident.cause == "instance_lost"
    assert incident.runtime_instance_id == proof.held["ask"].runtime_instance_id
    assert incident.dead_since is not None and incident.recovery_ms is not None
    runs = {run.shared_run_id: run for run in incident.runs}
    assert set(runs) == set(proof.runs.values())
    by_name = {name: runs[srun] for name, srun in proof.runs.items()}
    assert {name: (run.outcome.value, run.final_status) for name, run in by_name.items()} == {
        "idempotent": ("resumed", "Completed"),
        "one-shot": ("resumed", "Failed"),
        "ask": ("resumed", "Completed"),
    }
    for name, run in by_name.items():
        assert run.execution_id == proof.held[name].execution_id
        assert run.local_run_id == proof.held[name].local_run_id
        assert run.resumed_at is not None and run.finished_at is not None
        assert run.recovered_at <= run.resumed_at <= run.finished_at
    settled = {
        name: sorted((op.step, op.settled_by) for op in run.uncertain) for name, run in by_name.items()
    }
    assert settled == {
        "idempotent": [("charge", "retried"), ("ticket-http", "retried"), ("ticket-stdio", "retried")],
        "one-shot": [("mail", "failed"), ("post", "failed")],
        "ask": [("mail", "human_done")],
    }
    assert incident.counts.model_dump() == {
        "runs": 3,
        "resumed": 3,
        "redispatched": 0,
        "restored": 0,
        "failed_lost": 0,
        "uncertain": 6,
        "settled": 6,
        "completed": 2,
        "failed": 1,
    }
    assert report.counts == incident.counts


def test_the_recovery_pass_wrote_one_report_entry_and_another_tenant_sees_nothing(proof: CrashProof) -> None:
    [entry] = proof.pass_reports
    assert entry.attributes["cause"] == "instance_lost" and entry.attributes["counts"]["runs"] == 3
    assert entry.attributes["counts"]["uncertain"] == 6
    assert {run["shared_run_id"] for run in entry.attributes["runs"]} == set(proof.runs.values())
    assert proof.reports["tenant-b"].incidents == [] and proof.reports["tenant-b"].counts.runs == 0


async def test_recovery_report_answers_over_mcp_as_a_tool_and_a_resource_for_the_callers_tenant_only(
    proof: CrashProof,
) -> None:
    backend = ToolBackend(
        catalog=PipelineCatalog.from_directory(DEFAULT_PIPELINES_DIR),
        validate_pipeline=proof.plane.parts.engine.validate,
        control_plane=proof.plane,
        control=cast(Any, None),
        replay=proof.audit.replay,
        audit=proof.audit.queries,
        recovery_reports=RecoveryReports(proof.audit.queries),
    )
    answers = {}
    for tenant in ("tenant-a", "tenant-b"):
        viewer = Principal(name=f"{tenant}-viewer", user_id="v", tenant_id=tenant, roles=("viewer",))
        async with held_session(server_for(backend, viewer)) as client:
            tool = await ok(client, "recovery.report", {})
            resource = await client.read_resource("recovery://report/all")
            answers[tenant] = (tool, json.loads(resource.contents[0].text))  # type: ignore[union-attr]
    tool, resource = answers["tenant-a"]
    assert tool == resource
    [incident] = tool["incidents"]
    assert {run["shared_run_id"] for run in incident["runs"]} == set(proof.runs.values())
    assert tool["counts"]["uncertain"] == 6 and tool["counts"]["settled"] == 6
    assert answers["tenant-b"][0] == answers["tenant-b"][1]
    assert answers["tenant-b"][0]["incidents"] == [] and answers["tenant-b"][0]["counts"]["runs"] == 0
