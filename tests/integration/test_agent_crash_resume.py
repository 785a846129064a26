"""A 10-turn `ai.agent` survives the SIGKILL of its runtime-instance process, three times, and completes
on the same ExecutionId without repeating a completed model turn or a side effect.

One control plane in this process (real Redis, SQLite shared with its children, health and
recovery loops, scale-out) and one Dedicated runtime-instance process (HTTP) for the tenant;
each kill is followed by recovery onto a replacement process the control plane scales out.
The model is the loopback LLM server of examples/agents (OpenAI wire format), counting each
turn whose reply went out; the tool is `tool.http` to a loopback peer counting its effects by
Idempotency-Key (the tool's operation id). Kills: (1) while the model server holds a turn's
reply (during a model call), (2) while the peer holds its answer after applying the effect
(during a tool call: the call is uncertain, retried with the same operation id, the peer
deduplicates), (3) as soon as a tool call's checkpoint is final (before or while the next
model call is held). The recovery report lists the run under each incident.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from runtime_core.agents import AiAgentExecutor, SubStepState, read_sub_steps
from runtime_core.hot_state import EmbeddedRedis, connect_hot_state
from runtime_core.instances import HostTransport, LocalRunStatus
from runtime_core.pipeline import parse_pipeline
from runtime_core.queueing import SubmitMode
from runtime_core.recovery import RecoveryReports, RunOutcome
from runtime_core.steps import StepProviders, StepProviderSettings
from runtime_core.storage import SqliteDurableStore
from tests.agent_support import API_KEY, KEY_ENV, LoopbackLlm, llm_settings
from tests.helpers import wait_until
from tests.integration import crash_isolation_scenario as scenario
from tests.integration.control_plane_support import TENANT_A
from tests.loopback import serving
from tests.side_effect_peer import SideEffectPeer

TURNS = 10
STEP_TIMEOUT_S = 60


def script() -> list[dict[str, Any]]:
    calls = [
        {
            "text": f"Filing {turn}.",
            "tool_calls": [{"name": "file_note", "arguments": {"note": f"note {turn}"}}],
        }
        for turn in range(TURNS - 1)
    ]
    return [*calls, {"text": "All nine notes are filed."}]


def agent_pipeline(peer_url: str) -> Any:
    tool = {
        "name": "file_note",
        "description": "File a note (a side effect).",
        "stepKey": "tool.http",
        "config": {"url": f"{peer_url}/effects/idempotent", "method": "POST", "onUncertain": "retry"},
        "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}},
    }
    agent = {
        "name": "agent",
        "stepKey": "ai.agent",
        "input": {"run": "state.run"},
        "config": {
            "prompt": "File nine notes ({run})",
            "provider": "gpt",
            "tools": [tool],
            "limits": {"maxTurns": 12},
        },
    }
    return parse_pipeline({"name": "agent-crash", "steps": [agent]})


async def test_a_ten_turn_agent_killed_three_times_completes_on_its_execution_without_repeats(
    redis_server: EmbeddedRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)  # the children inherit it
    llm, peer = LoopbackLlm(script()), SideEffectPeer()
    hot_state = connect_hot_state(redis_server.url, prefix=f"agentcrash{secrets.token_hex(4)}:")
    durable = await SqliteDurableStore.open(tmp_path / "runtime.db")
    async with serving(llm.app) as llm_url, serving(peer.app()) as peer_url:
        providers_file = tmp_path / "providers.json"
        providers_file.write_text(json.dumps({"llm": llm_settings(llm_url)}), encoding="utf-8")
        providers = StepProviders.build(StepProviderSettings.model_validate({"llm": llm_settings(llm_url)}))
        plane, audit = scenario.build_plane(
            hot_state,
            durable,
            redis_server.url,
            tmp_path,
            providers_file=providers_file,
            background_pump=True,
        )
        executors = plane.parts.engine.executors
        executors.register(AiAgentExecutor(providers.llm, plane.parts.dag_store, executors))
        try:
            await plane.start()
            manager = scenario.hosts(plane)
            await manager.start_host(scenario.tenant_launch(HostTransport.HTTP, "tenant-a"))
            run_tag = secrets.token_hex(4)
            submitted = await plane.submit(
                agent_pipeline(peer_url), {"run": run_tag}, SubmitMode.QUEUE_FIRST, TENANT_A
            )
            first = await _located(plane, submitted.shared_run_id)
            execution_id = first.execution_id

            async def kill_current_host() -> None:
                record = await scenario.latest(plane, submitted.shared_run_id)
                [host] = [h for h in manager.hosts() if record.runtime_instance_id in h.runtime_instance_ids]
                assert await manager.kill_host(host.host_id) == -9

            # (1) During a model call: turn 3's reply is held by the model server.
            llm.hold(3)
            await _until(lambda: _true(3 in llm.waiting))
            await kill_current_host()
            await _until(lambda: _true(3 not in llm.waiting))  # the server saw its client go
            llm.release(3)

            # (2) During a tool call: the peer applies turn 5's effect and holds its answer.
            llm.hold(5)
            await _until(lambda: _true(5 in llm.waiting))
            peer.hold = True
            llm.release(5)
            await _until(lambda: _true(peer.held.is_set()))
            await kill_current_host()
            peer.hold = False
            peer.release()

            # (3) Right after a checkpoint: turn 7's tool call is final; turn 8 is held.
            llm.hold(8)

            async def tool_of_turn_7_final() -> bool:
                sub_steps = await read_sub_steps(plane.parts.dag_store, execution_id, "agent")
                return len(sub_steps) > 15 and sub_steps[15].state is SubStepState.COMPLETED

            await _until(tool_of_turn_7_final)
            await kill_current_host()
            await _until(lambda: _true(8 not in llm.waiting))
            llm.release(8)

            async def completed() -> bool:
                record = await plane.parts.index.get_by_shared(submitted.shared_run_id)
                return record is not None and record.status is LocalRunStatus.COMPLETED

            await _until(completed)
            final = await scenario.latest(plane, submitted.shared_run_id)
            assert final.execution_id == execution_id and final.local_run_id != first.local_run_id

            # The model server completed each of the ten turns of this conversation once.
            conversation = f"File nine notes ({run_tag})"
            assert sorted(t for (c, t), n in llm.completed.items() if c == conversation and n == 1) == list(
                range(TURNS)
            )
            assert llm.twice() == []
            # Each of the nine effects took place once, under its own operation id.
            assert len(peer.effects) == TURNS - 1 and set(peer.effects.values()) == {1}
            assert max(peer.calls.values()) == 2  # the call cut by kill (2) went out again, same id

            sub_steps = await read_sub_steps(plane.parts.dag_store, execution_id, "agent")
            assert [s.state for s in sub_steps] == [SubStepState.COMPLETED] * (2 * TURNS - 1)
            assert sub_steps[6].attempts == 2 and sub_steps[11].attempts == 2  # the cut model and tool calls

            await audit.flush()
            entries = await audit.queries.ledger(TENANT_A, execution_id=execution_id, limit=10_000)
            events = [e.event for e in entries]
            # Each sub-step is in the story: its own completion, or (the entry of a process killed
            # just after the checkpoint) the final sub-steps a resumed attempt found.
            told = {
                e.attributes["seq"]
                for e in entries
                if e.event in ("agent.turn_completed", "agent.tool_completed")
            }
            resumed = [e for e in entries if e.event == "agent.resumed"]
            assert len(resumed) == 3
            assert told | {seq for e in resumed for seq in e.attributes["final_seqs"]} == set(
                range(2 * TURNS - 1)
            )
            uncertain = {e.attributes["operation"] for e in entries if e.event == "step.operation_uncertain"}
            assert {"turn-3", "tool-11.request"} <= uncertain
            settled = {
                e.attributes["operation"]: e.attributes["settled_by"]
                for e in entries
                if e.event == "step.operation_settled"
            }
            assert settled["turn-3"] == "retried" and settled["tool-11.request"] == "retried"
            assert events.count("execution.reassigned") == 3

            # The recovery report lists the run under each of the three incidents, resumed, and
            # the two calls found uncertain with how they were settled.
            report = await RecoveryReports(audit.queries).report(TENANT_A)
            ours = [
                run
                for incident in report.incidents
                for run in incident.runs
                if run.execution_id == execution_id
            ]
            assert len(ours) == 3 and {run.outcome for run in ours} == {RunOutcome.RESUMED}
            assert {run.final_status for run in ours} == {"Completed"}
            reported = {op.operation: op.settled_by for run in ours for op in run.uncertain}
            assert reported["turn-3"] == "retried" and reported["tool-11.request"] == "retried"
        finally:
            for turn in (3, 5, 8):
                llm.release(turn)
            peer.release()
            await plane.stop()
            await audit.close()
            await durable.close()
            await hot_state.close()
            await providers.aclose()
    assert scenario.hosting_processes(hot_state.prefix) == []


async def _located(plane: Any, shared_run_id: str) -> Any:
    async def found() -> Any:
        record = await plane.parts.index.get_by_shared(shared_run_id)
        return record if record is not None and record.execution_id else None

    await _until(found)
    return await found()


async def _until(condition: Callable[[], Awaitable[Any]]) -> None:
    await wait_until(condition, timeout=STEP_TIMEOUT_S, interval=0.02)


async def _true(value: bool) -> bool:
    return value
