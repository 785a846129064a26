"""The data centre's stores, each on its own host: a 3-master Redis Cluster and a PostgreSQL cluster.

Owns starting them inside their host's namespace, bound to that host's address only:
three `redis-server --cluster-enabled yes` joined by `redis-cli --cluster create`, and a
PostgreSQL cluster made by `initdb` in a temporary directory and run by `postgres` as the
`postgres` OS user (trust authentication for the data centre's subnet, one database), and
stopping them. Must not listen on, or connect to, any address outside the data centre.
"""

from __future__ import annotations

import glob
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.hosts.network import SUBNET, Host, run

REDIS_PORTS = (7001, 7002, 7003)
POSTGRES_PORT = 5432
POSTGRES_DATABASE = "mcp_runtime"
_START_TIMEOUT_S = 60.0


def _poll(ready: Callable[[], bool], what: str, process: subprocess.Popen[bytes] | None = None) -> None:
    """Poll another process's state (there is no event to wait on) until `ready()`."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not ready():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process ended with {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not ready within {_START_TIMEOUT_S:g} s")
        time.sleep(0.1)


@dataclass
class RedisClusterHost:
    host: Host
    root: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"{self.host.address}:{port}" for port in REDIS_PORTS)

    def _cli(self, port: int, *argv: str) -> list[str]:
        return self.host.exec_argv(["redis-cli", "-h", self.host.address, "-p", str(port), *argv])

    def start(self) -> RedisClusterHost:
        for port in REDIS_PORTS:
            directory = self.root / f"node{port}"
            directory.mkdir(parents=True)
            command = ["redis-server", "--bind", self.host.address, "--port", str(port)]
            command += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            command += ["--dir", str(directory), "--save", "", "--appendonly", "yes"]
            command += ["--protected-mode", "no", "--logfile", str(directory / "redis.log")]
            self.processes.append(subprocess.Popen(self.host.exec_argv(command)))
        for port, process in zip(REDIS_PORTS, self.processes, strict=True):
            _poll(lambda p=port: run(self._cli(p, "ping"), check=False).stdout.strip() == "PONG",
                  f"redis {port}", process)  # fmt: skip
        nodes = [f"{self.host.address}:{port}" for port in REDIS_PORTS]
        created = self.host.exec_argv(["redis-cli", "--cluster", "create", *nodes])
        run([*created, "--cluster-replicas", "0", "--cluster-yes"])
        _poll(self._settled, "redis cluster")
        return self

    def _settled(self) -> bool:
        for port in REDIS_PORTS:
            info = run(self._cli(port, "cluster", "info"), check=False).stdout
            known = run(self._cli(port, "cluster", "nodes"), check=False).stdout.count("connected")
            if "cluster_state:ok" not in info or known < len(REDIS_PORTS):
                return False
        return True

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait(timeout=10)
        self.processes.clear()


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's binaries (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[4]))
    assert found, "PostgreSQL is not installed (scripts/ensure-postgres.sh installs it)"
    return Path(found[-1]).parent


@dataclass
class PostgresHost:
    """`root` is made by `start()` (a temporary directory the `postgres` user owns)."""

    host: Host
    root: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@{self.host.address}:{POSTGRES_PORT}/{POSTGRES_DATABASE}"

    def _as_postgres(self, argv: list[str]) -> list[str]:
        as_user = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
        return self.host.exec_argv([*as_user, *argv])

    def start(self) -> PostgresHost:
        bin_dir = postgres_bin()
        self.root = Path(tempfile.mkdtemp(prefix="h27-postgres-"))
        shutil.chown(self.root, "postgres", "postgres")
        data = self.root / "data"
        run(self._as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                               "--auth=trust", "--no-sync"]))  # fmt: skip
        with (data / "pg_hba.conf").open("a", encoding="utf-8") as hba:
            hba.write(f"host all all {SUBNET}.0/24 trust\n")
        settings = {
            "listen_addresses": self.host.address,
            "port": str(POSTGRES_PORT),
            "unix_socket_directories": str(self.root),
            "fsync": "off",  # a test cluster: durability across a power loss is not what is tested
            "max_connections": "200",
        }
        options = [f"-c{key}={value}" for key, value in settings.items()]
        log = (self.root / "postgres.log").open("wb")
        self.process = subprocess.Popen(
            self._as_postgres([str(bin_dir / "postgres"), "-D", str(data), *options]),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        ready = self.host.exec_argv([str(bin_dir / "pg_isready"), "-h", self.host.address, "-p", "5432"])
        _poll(lambda: run(ready, check=False).returncode == 0, "postgres", self.process)
        psql = [str(bin_dir / "psql"), "-h", self.host.address, "-U", "postgres", "-c"]
        run(self.host.exec_argv([*psql, f"CREATE DATABASE {POSTGRES_DATABASE}"]))
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown: disconnects what is left
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            self.process = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
