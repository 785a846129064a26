"""A real 3-master Redis Cluster on loopback for the tests that run on both kinds of Redis.

Owns starting three `redis-server --cluster-enabled yes` nodes on free ports, each in its
own directory with AOF on (so a restarted master comes back with its data), joining them
with `redis-cli --cluster create`, waiting until every node reports `cluster_state:ok`, and
restarting one master for fault tests. Must not be used by production code.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

from runtime_core.hot_state import EmbeddedRedis

MASTERS = 3
SETTLE_TIMEOUT_S = 30.0
# A node also listens on its cluster bus port, port + 10000, which must be a valid free port:
# ephemeral ports (the usual "free port") are often too high for that.
CLUSTER_BUS_OFFSET = 10_000
CLUSTER_PORT_RANGE = (20_000, 30_000)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_cluster_port() -> int:
    while True:
        port = random.randint(*CLUSTER_PORT_RANGE)
        if _bindable(port) and _bindable(port + CLUSTER_BUS_OFFSET):
            return port


class RedisClusterServer:
    def __init__(self, root: Path, masters: int = MASTERS) -> None:
        self.nodes = [
            EmbeddedRedis(
                root / f"node{n}",
                port=_free_cluster_port(),
                extra_args=("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            )
            for n in range(masters)
        ]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self) -> RedisClusterServer:
        for node in self.nodes:
            node.start()
        redis_cli = shutil.which("redis-cli")
        assert redis_cli is not None, (
            "redis-cli is installed with redis-server (apt-get install redis-server)"
        )
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [redis_cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait_until_ok()
        return self

    def wait_until_ok(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Every node agrees the cluster is ok and knows every other node (slots settled)."""
        deadline = time.monotonic() + timeout_s
        while not all(self._node_ok(node) for node in self.nodes):
            if time.monotonic() > deadline:
                raise AssertionError(f"Redis Cluster not ok within {timeout_s}s")
            time.sleep(0.05)  # polling child processes, not synchronising our own code

    def _node_ok(self, node: EmbeddedRedis) -> bool:
        try:
            client = redis.Redis(port=node.port, decode_responses=True, socket_timeout=1)
            info = client.cluster("info")
            connected = [n for n in client.cluster("nodes").values() if n.get("connected")]
            client.close()
        except redis.RedisError:
            return False
        return info.get("cluster_state") == "ok" and len(connected) >= len(self.nodes)

    def dbsize(self, index: int) -> int:
        client = redis.Redis(port=self.nodes[index].port, socket_timeout=5)
        try:
            return int(client.dbsize())
        finally:
            client.close()

    def restart_master(self, index: int) -> None:
        """SIGKILL one master and start it again on its port, nodes.conf and AOF."""
        node = self.nodes[index]
        node.kill()
        node.start()
        self.wait_until_ok()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
