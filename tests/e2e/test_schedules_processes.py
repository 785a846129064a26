"""Issue 30.1 on real processes: two `mcp-runtime serve` control planes share one Redis and one
durable store; a cron schedule every second fires each tick exactly once for 20 s, then both
stop; after 5 s of downtime one starts again and catch-up `run_once` makes exactly one run for
the missed ticks, after which ticks fire on time again."""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_runtime import hash_token
from runtime_core.hot_state import EmbeddedRedis, connect_hot_state, find_free_port
from tests.e2e.mcp_support import (
    BearerClient,
    child_process,
    clean_environment,
    serve_command,
    wait_for_health,
)
from tests.helpers import wait_until

TOKEN = "sched-operator-" + secrets.token_hex(8)
TICKS_WITH_TWO_PLANES = 20
DOWNTIME_MS = 5_000
MISFIRE_GRACE_MS = 3_000
NOOP = {"name": "tick", "steps": [{"name": "only", "stepKey": "test.noop"}]}


def _config(path: Path) -> Path:
    principal = {
        "user_id": "sam",
        "tenant_id": "acme",
        "roles": ["operator"],
        "token_sha256": [hash_token(TOKEN)],
    }
    path.write_text(json.dumps({"principals": {"acme-operator": principal}}), encoding="utf-8")
    return path


@contextmanager
def _control_planes(
    names: list[str], data_dir: Path, config: Path, env: dict[str, str]
) -> Iterator[list[str]]:
    """`serve` processes named `names` (started together), each on a free port: their base URLs."""
    with ExitStack() as stack:
        started = []
        for name in names:
            port = find_free_port()
            command = serve_command("http", data_dir, "--port", str(port), "--config", str(config))
            log = data_dir.parent / f"{name}.log"
            process = stack.enter_context(
                child_process(command, env={**env, "MCP_RUNTIME_HOST": name}, log=log)
            )
            started.append((process, f"http://127.0.0.1:{port}", log))
        for process, base_url, log in started:
            wait_for_health(process, base_url, log)
        yield [base_url for _, base_url, _ in started]


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error and result.structured_content is not None, result.content
    return result.structured_content


async def _fired(client: Client, schedule_id: str) -> int:
    return int((await _call(client, "schedules.get", {"schedule_id": schedule_id}))["schedule"]["fire_count"])


async def _until_fired(client: Client, schedule_id: str, count: int, timeout: float) -> None:
    async def enough() -> bool:
        return await _fired(client, schedule_id) >= count

    await wait_until(enough, timeout=timeout, interval=0.2)


async def _submitted_attributes(client: Client) -> list[dict[str, Any]]:
    """The `shared_run.submitted` ledger attributes of every run of the tenant (all scheduled here)."""
    runs = (await _call(client, "runs.list", {"limit": 200}))["runs"]
    found = []
    for run in runs:
        ledger = await _call(client, "ledger", {"run_id": run["shared_run_id"]})
        found += [
            entry["attributes"] for entry in ledger["entries"] if entry["event"] == "shared_run.submitted"
        ]
    return found


async def test_two_control_planes_fire_each_cron_tick_once_and_catch_up_once_after_downtime(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    data_dir = tmp_path / "shared-data"
    data_dir.mkdir()
    config = _config(tmp_path / "server.json")
    prefix = f"sched{secrets.token_hex(4)}:"
    env = clean_environment(
        REDIS_URL=redis_server.url,
        MCP_RUNTIME_REDIS_PREFIX=prefix,
        MCP_RUNTIME_SCHEDULE_MISFIRE_GRACE_MS=str(MISFIRE_GRACE_MS),
    )
    hot_state = connect_hot_state(redis_server.url, prefix=prefix)
    try:
        with _control_planes(["cp-a", "cp-b"], data_dir, config, env) as (url_a, _):
            async with BearerClient(f"{url_a}/mcp", TOKEN) as client:
                created = await _call(
                    client,
                    "schedules.create",
                    {
                        "name": "every-second",
                        "definition": NOOP,
                        "cron": "* * * * * *",
                        "catch_up": "run_once",
                        "overlap": "allow",
                    },
                )
                schedule_id = created["schedule"]["schedule_id"]
                await _until_fired(client, schedule_id, TICKS_WITH_TWO_PLANES, timeout=60)
        stopped_at = await hot_state.server_time_ms()  # both control planes have exited

        async def downtime_passed() -> bool:
            return await hot_state.server_time_ms() >= stopped_at + DOWNTIME_MS

        await wait_until(downtime_passed, timeout=30, interval=0.05)
        with _control_planes(["cp-a"], data_dir, config, env) as (url_a,):
            async with BearerClient(f"{url_a}/mcp", TOKEN) as client:
                before = await _fired(client, schedule_id)
                await _until_fired(client, schedule_id, before + 3, timeout=60)
                await _call(client, "schedules.pause", {"schedule_id": schedule_id})
                fired = await _submitted_attributes(client)
    finally:
        await hot_state.close()

    assert {attributes["schedule.id"] for attributes in fired} == {schedule_id}
    ticks = Counter(attributes["schedule.tick"] for attributes in fired)
    assert set(ticks.values()) == {1}, "a tick made more than one run"
    by_tick = {datetime.fromisoformat(a["schedule.tick"]): a["schedule.trigger"] for a in fired}
    order = sorted(by_tick)
    gaps = [(b - a).total_seconds() for a, b in pairwise(order)]
    downtime = gaps.index(max(gaps))
    before_stop, after_restart = order[: downtime + 1], order[downtime + 1 :]
    assert max(gaps) * 1000 >= DOWNTIME_MS - MISFIRE_GRACE_MS
    assert len(before_stop) >= TICKS_WITH_TWO_PLANES
    assert all(gap == 1 for gap in gaps[:downtime]), "a tick was missed while two control planes ran"
    assert all(gap == 1 for gap in gaps[downtime + 1 :]), "a tick was missed after the restart"
    assert [by_tick[t] for t in order].count("catch_up") == 1
    assert by_tick[after_restart[0]] == "catch_up"  # the latest missed tick, then on-time ticks
    assert {by_tick[t] for t in before_stop + after_restart[1:]} == {"scheduled"}
    fired_by = {datetime.fromisoformat(a["schedule.tick"]): a["schedule.fired_by"] for a in fired}
    assert {fired_by[t] for t in before_stop} == {"control-plane:cp-a", "control-plane:cp-b"}  # both raced
