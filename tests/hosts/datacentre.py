"""A small data centre on this machine: seven hosts as network namespaces on one bridge.

Owns building it (in order: the network, the Redis Cluster host, the PostgreSQL host, two
control-plane hosts running `serve`, two runtime-instance hosts, one HTTP and one gRPC, each
process bound to its own host's address), the client host this test process joins (an event
loop on a thread inside the `client` namespace: every MCP session, Redis or store read of the
tests goes over the data centre's network), bringing it back to health between scenarios
(links healed and fast, every host's process running and ready), and tearing all of it down.
Must not decide what a scenario does or asserts.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from mcp_runtime import hash_token
from runtime_core.hot_state import HotState, connect_hot_state
from runtime_core.instances import InstanceEntry, InstanceHealth, InstanceRegistry, TenantSettingsCatalog
from runtime_core.storage import DurableStore, DurableStoreSettings, open_durable_store
from tests.hosts import processes
from tests.hosts.network import NamespaceLoop, Network, kill_all_in
from tests.hosts.processes import HostProcess
from tests.hosts.servers import PostgresHost, RedisClusterHost

CONTROL_PLANES = ("cp1", "cp2")
RUNTIME_HOSTS = {"rt1": "http", "rt2": "grpc"}
HOSTS = ["client", *CONTROL_PLANES, *RUNTIME_HOSTS, "redis", "pg"]
TENANTS = ("dc-north", "dc-south", "dc-east")
HEARTBEAT_MS = 200
HEALTH_WINDOW_MS = 2_000  # a runtime host silent this long is Unsafe
RUN_SLOTS = 24  # runs one runtime instance executes at once (slow links need many in flight)
WORKERS = 32
READY_TIMEOUT_S = 180.0  # process start-up on a loaded 2-core machine can take a minute
FENCED_LOG_EVENT = "instance.fenced"  # what a runtime-instance process logs once it was fenced
T = TypeVar("T")


@dataclass
class Tenant:
    tenant_id: str
    token: str = field(default_factory=lambda: "dc-" + secrets.token_hex(12))


@dataclass
class DataCentre:
    root: Path
    network: Network = field(default_factory=Network)
    tenants: list[Tenant] = field(default_factory=lambda: [Tenant(t) for t in TENANTS])
    redis_prefix: str = field(default_factory=lambda: f"dc{secrets.token_hex(3)}:")
    planes: dict[str, HostProcess] = field(default_factory=dict)
    runtimes: dict[str, HostProcess] = field(default_factory=dict)
    redis: RedisClusterHost | None = None
    postgres: PostgresHost | None = None
    client: NamespaceLoop | None = None
    hot_state: HotState | None = None  # the client's connection (observations)
    store: DurableStore | None = None

    # -- building and tearing down -------------------------------------------------------------
    def build(self) -> None:
        self.network.create(HOSTS)
        hosts = self.network.hosts
        self.redis = RedisClusterHost(hosts["redis"], self.root / "redis").start()
        self.postgres = PostgresHost(hosts["pg"]).start()
        config = self._write_config(self.root / "server.json")
        for name in CONTROL_PLANES:
            self.planes[name] = processes.control_plane(
                hosts[name], self.data_dir(name), config, self.environment(), self.root
            )
        for name, transport in RUNTIME_HOSTS.items():
            options = {
                "--redis-url": self.redis.url,
                "--redis-prefix": self.redis_prefix,
                "--tenant": "dc-shared",
                "--isolation": "Shared",
                "--instance-prefix": name,
                "--workers": str(WORKERS),
                "--max-local-workers-per-execution": "2",
                "--max-concurrent-runs": str(RUN_SLOTS),
                "--heartbeat-ms": str(HEARTBEAT_MS),
                "--discovery-timeout": "60",
            }
            self.runtimes[name] = processes.runtime_instance(
                hosts[name], transport, self.data_dir(name), options, self.environment(), self.root
            )
        self.client = NamespaceLoop(hosts["client"].namespace).start()

    def start_all(self) -> None:
        """Control planes first (a runtime-instance process waits for their discovery record)."""
        for process in [*self.planes.values(), *self.runtimes.values()]:
            process.start()

    def restore(self) -> None:
        """Undo what a scenario left: partitions healed, links fast, every host's process running
        (one a scenario killed is started again; a fenced one is replaced by a new incarnation)."""
        self.network.heal_all()
        self.network.fast_all()
        for process in [*self.planes.values(), *self.runtimes.values()]:
            if process.alive and FENCED_LOG_EVENT in process.log_text():
                process.stop()
            if not process.alive:
                process.forget()
                process.start()

    def kill_host(self, name: str) -> list[int]:
        """The host loses power: every process in its namespace is SIGKILLed at once."""
        killed = kill_all_in(self.network.hosts[name].namespace)
        (self.planes.get(name) or self.runtimes[name]).forget()
        return killed

    def data_dir(self, host: str) -> Path:
        """A host's own data directory (the durable store is the PostgreSQL host's)."""
        directory = self.root / f"data-{host}"
        directory.mkdir(exist_ok=True)
        return directory

    def environment(self) -> dict[str, str]:
        assert self.redis is not None and self.postgres is not None
        return {
            "REDIS_URL": self.redis.url,
            "MCP_RUNTIME_DURABLE_URL": self.postgres.url,
            "MCP_RUNTIME_REDIS_PREFIX": self.redis_prefix,
            "MCP_RUNTIME_HEARTBEAT_MS": str(HEARTBEAT_MS),
            "MCP_RUNTIME_HEALTH_WINDOW_MS": str(HEALTH_WINDOW_MS),
            "MCP_RUNTIME_HEALTH_CHECK_INTERVAL_MS": "200",
            "MCP_RUNTIME_RECOVERY_INTERVAL_MS": "200",
            # Finished runs leave Redis 3 s after they end: their ledger and trace are durable by
            # then even over the slow links (the archiver waits for them, else comes back 30 s later).
            "MCP_RUNTIME_HOT_GRACE_MS": "3000",
        }

    def _write_config(self, path: Path) -> Path:
        principals = {
            f"{t.tenant_id}-operator": {
                "user_id": f"{t.tenant_id}-ops",
                "tenant_id": t.tenant_id,
                "roles": ["admin"],
                "token_sha256": [hash_token(t.token)],
            }
            for t in self.tenants
        }
        path.write_text(json.dumps({"principals": principals}), encoding="utf-8")
        return path

    async def open_observers(self) -> None:
        """On the client loop: this test's own Redis connection and durable store."""
        assert self.redis is not None and self.postgres is not None
        self.hot_state = connect_hot_state(self.redis.url, prefix=self.redis_prefix)
        self.store = await open_durable_store(DurableStoreSettings.from_url(self.postgres.url))

    async def close_observers(self) -> None:
        if self.store is not None:
            await self.store.close()
        if self.hot_state is not None:
            await self.hot_state.close()

    def destroy(self) -> None:
        """Stop every process (gracefully, so logs and buffered records are flushed), then the
        stores, then remove every namespace (killing whatever is left in it)."""
        try:
            for process in [*self.runtimes.values(), *self.planes.values()]:
                process.stop()
            if self.client is not None:
                self.client.stop()
            if self.postgres is not None:
                self.postgres.stop()
            if self.redis is not None:
                self.redis.stop()
        finally:
            self.network.destroy()

    # -- running things on the client host -----------------------------------------------------
    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """From a thread that runs no loop (fixtures): run `coroutine` on the client host."""
        assert self.client is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.client.loop).result(
            timeout=READY_TIMEOUT_S * 2
        )

    async def on_client(self, coroutine: Coroutine[Any, Any, T]) -> T:
        assert self.client is not None
        return await self.client.call(coroutine)

    def plane_url(self, name: str) -> str:
        return f"http://{self.network.hosts[name].address}:{processes.SERVE_PORT}"

    # -- health (client loop) -------------------------------------------------------------------
    async def readiness(self, plane: str) -> tuple[int, dict[str, Any]]:
        """GET /readyz of a control plane: status code and body (599 when it does not answer)."""
        try:
            async with httpx.AsyncClient(timeout=5, trust_env=False) as http:
                answer = await http.get(f"{self.plane_url(plane)}/readyz")
            return answer.status_code, answer.json()
        except httpx.HTTPError as exc:
            return 599, {"error": f"{type(exc).__name__}: {exc}"}

    async def instances(self) -> dict[str, InstanceEntry]:
        """Registered runtime instances by host id (one instance per runtime host)."""
        assert self.hot_state is not None
        entries = await InstanceRegistry(self.hot_state, TenantSettingsCatalog()).entries()
        return {e.descriptor.host: e for e in entries}

    async def wait_all_ready(self) -> None:
        """Every control plane answers ready and every runtime host has a live, Healthy instance
        registered by its current process."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            waiting = await self._not_ready()
            if not waiting:
                return
            if time.monotonic() > deadline:
                logs = "\n".join(p.log_tail() for p in [*self.planes.values(), *self.runtimes.values()])
                raise AssertionError(f"not ready within {READY_TIMEOUT_S:g} s: {waiting}\n{logs}")
            await asyncio.sleep(0.1)  # polling other processes: there is no event to wait on

    async def _not_ready(self) -> list[str]:
        waiting = []
        for name, process in [*self.planes.items(), *self.runtimes.items()]:
            if not process.alive:
                raise AssertionError(f"{name} exited with {process.process and process.process.returncode}\n"
                                     f"{process.log_tail()}")  # fmt: skip
        for name in self.planes:
            status, _ = await self.readiness(name)
            if status != 200:
                waiting.append(f"{name} /readyz {status}")
        registered = await self.instances()
        for name, process in self.runtimes.items():
            entry = registered.get(name)
            started = "runtime_instance_process.ready" in process.log_text()
            if entry is None or not started or not entry.live or entry.health is not InstanceHealth.HEALTHY:
                waiting.append(f"{name} instance {entry.health if entry else 'unregistered'}")
        return waiting
