"""Hosts as Linux network namespaces: a bridge, one namespace per host, partitions and slow links.

Owns the namespaces of one test session (all named `<prefix>-<host>`, the prefix carrying
this process's pid), the bridge joining them (in a namespace of its own: nothing is created
in the machine's own namespace), each host's one address on the private 10.27.0.0/24 (no
other address is ever a target), cutting a host off from a peer with nftables rules inside
the host's namespace (both ways, only what the host sends / receives, or only the peer's data
packets), slowing every link (through `link_emulator`: this kernel has no netem), the
processes living in a namespace, and an event loop on a thread
that joined a namespace (so this test process can be a client host of the data centre).
Leftovers of a crashed session (its pid gone) are swept at start. Must not touch any
namespace, link or process it did not create.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

SUBNET = "10.27.0"
LINK_EMULATOR_PORT = "slow0"
REPOSITORY = Path(__file__).resolve().parents[2]
PREFIX_PATTERN = re.compile(r"^h27p(?P<pid>\d+)x[0-9a-f]{4}-")
NEEDED_COMMANDS = ("ip", "tc", "nft")
_CLONE_NEWNET = 0x40000000
_COMMAND_TIMEOUT_S = 30
Direction = Literal["both", "in", "out", "replies"]
T = TypeVar("T")


def namespace_support() -> str | None:
    """Why this machine cannot build the data centre (None when it can)."""
    if os.geteuid() != 0:
        return f"network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN); this is uid {os.geteuid()}"
    missing = [command for command in NEEDED_COMMANDS if shutil.which(command) is None]
    if missing:
        return f"missing {', '.join(missing)} (scripts/test.sh installs iproute2 and nftables)"
    probe = f"h27p{os.getpid()}x{secrets.token_hex(2)}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """One short command (ip, nft, tc, redis-cli, ...); its stderr is in the error when it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def namespaces() -> list[str]:
    listed = run(["ip", "netns", "list"]).stdout.splitlines()
    return [line.split()[0] for line in listed if line.strip()]


def sweep_leftovers() -> list[str]:
    """Delete the namespaces (and their processes) of sessions whose process is gone."""
    swept = []
    for name in namespaces():
        match = PREFIX_PATTERN.match(name)
        if match is None or _alive(int(match["pid"])):
            continue
        kill_all_in(name)
        run(["ip", "netns", "del", name], check=False)
        swept.append(name)
    return swept


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pids_in(namespace: str) -> list[int]:
    listed = run(["ip", "netns", "pids", namespace], check=False).stdout.split()
    return [int(pid) for pid in listed if pid.isdigit()]


def kill_all_in(namespace: str) -> list[int]:
    """SIGKILL every process of the namespace: the host loses power."""
    killed = pids_in(namespace)
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return killed


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str

    def exec_argv(self, argv: list[str]) -> list[str]:
        """`argv` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]


@dataclass
class Network:
    """`create(names)` builds the bridge and the hosts; `destroy()` removes everything made."""

    prefix: str = field(default_factory=lambda: f"h27p{os.getpid()}x{secrets.token_hex(2)}")
    hosts: dict[str, Host] = field(default_factory=dict)
    made: list[str] = field(default_factory=list)  # namespaces, in creation order
    _emulator: subprocess.Popen[str] | None = None

    @property
    def bridge_namespace(self) -> str:
        return f"{self.prefix}-net"

    def create(self, names: list[str]) -> None:
        self._namespace(self.bridge_namespace)
        bridge = ["ip", "-n", self.bridge_namespace, "link"]
        run([*bridge, "add", "br0", "type", "bridge"])
        run([*bridge, "set", "br0", "up"])
        for number, name in enumerate(names, start=10):
            self._host(name, f"{SUBNET}.{number}")

    def _namespace(self, name: str) -> None:
        run(["ip", "netns", "add", name])
        self.made.append(name)
        run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _host(self, name: str, address: str) -> None:
        host = Host(name, f"{self.prefix}-{name}", address)
        self._namespace(host.namespace)
        port = f"v-{name}"
        link = ["ip", "-n", self.bridge_namespace, "link"]
        run([*link, "add", port, "type", "veth", "peer", "name", "eth0", "netns", host.namespace])
        run([*link, "set", port, "master", "br0", "up"])
        run(["ip", "-n", host.namespace, "addr", "add", f"{address}/24", "dev", "eth0"])
        run(["ip", "-n", host.namespace, "link", "set", "eth0", "up"])
        self.hosts[name] = host

    def destroy(self) -> None:
        """Kill every process of every namespace made, then delete them (links go with them)."""
        self.fast_all()
        for name in reversed(self.made):
            kill_all_in(name)
            run(["ip", "netns", "del", name], check=False)
        self.made.clear()
        self.hosts.clear()

    # Partitions: nftables rules in the cut-off host's own namespace (table `inet partition`).
    def cut(self, host: str, peer: str, direction: Direction = "both") -> None:
        """Drop what `host` receives from `peer` ("in"), sends to it ("out"), or both; "replies":
        only the packets from `peer` that carry data (over 100 bytes), so connections open and
        requests arrive, while every answer is lost."""
        namespace, address = self.hosts[host].namespace, self.hosts[peer].address
        nft = ["ip", "netns", "exec", namespace, "nft"]
        run([*nft, "add", "table", "inet", "partition"])
        for chain, hook in (("inbound", "input"), ("outbound", "output")):
            spec = f"{{ type filter hook {hook} priority 0 ; policy accept ; }}"
            run([*nft, "add", "chain", "inet", "partition", chain, spec])
        inbound = ["ip", "saddr", address]
        if direction == "replies":
            inbound += ["ip", "length", "gt", "100"]
        if direction in ("both", "in", "replies"):
            run([*nft, "add", "rule", "inet", "partition", "inbound", *inbound, "drop"])
        if direction in ("both", "out"):
            run([*nft, "add", "rule", "inet", "partition", "outbound", "ip", "daddr", address, "drop"])

    def heal(self, host: str) -> None:
        """Remove every partition rule of `host` (none is fine)."""
        namespace = self.hosts[host].namespace
        run(["ip", "netns", "exec", namespace, "nft", "delete", "table", "inet", "partition"], check=False)

    def heal_all(self) -> None:
        for host in self.hosts:
            self.heal(host)

    # Slow links. This kernel has no netem (no delaying qdisc at all), so every host's traffic to
    # its peers is routed through the user-space switch of `link_emulator` (TAP port `slow0`).
    def slow_all(self, delay_ms: int, loss_percent: float) -> None:
        """Every link delays each frame `delay_ms` and loses `loss_percent` of them."""
        assert self._emulator is None, "links are slow already"
        command = ["python", "-m", "tests.hosts.link_emulator", "--delay-ms", str(delay_ms)]
        command += ["--loss-percent", str(loss_percent), *(h.namespace for h in self.hosts.values())]
        emulator = subprocess.Popen(
            ["ip", "netns", "exec", self.bridge_namespace, *command],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPOSITORY,
        )
        self._emulator = emulator
        ready = emulator.stdout.readline() if emulator.stdout else ""
        assert ready.strip() == "ready", f"the link emulator did not start (exit {emulator.poll()})"
        for host in self.hosts.values():
            run(["ip", "-n", host.namespace, "link", "set", LINK_EMULATOR_PORT, "up"])
            for peer in self.hosts.values():
                if peer is not host:
                    run(["ip", "-n", host.namespace, "route", "add", f"{peer.address}/32",
                         "dev", LINK_EMULATOR_PORT, "src", host.address])  # fmt: skip

    def fast_all(self) -> None:
        """Back to the kernel bridge: the routes and the emulator (and its ports) go."""
        for host in self.hosts.values():
            for peer in self.hosts.values():
                if peer is not host:
                    run(["ip", "-n", host.namespace, "route", "del", f"{peer.address}/32"], check=False)
        if self._emulator is not None:
            self._emulator.kill()
            self._emulator.wait(timeout=_COMMAND_TIMEOUT_S)
            self._emulator = None


class NamespaceLoop:
    """An asyncio loop on a thread of its own that joined a network namespace (setns applies to
    one thread): every socket its coroutines open, and its executor threads', is that host's."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=f"netns-{namespace}", daemon=True)
        self._joined: concurrent.futures.Future[None] = concurrent.futures.Future()

    def start(self) -> NamespaceLoop:
        self._thread.start()
        self._joined.result(timeout=_COMMAND_TIMEOUT_S)
        return self

    def _serve(self) -> None:
        try:
            join_namespace(self.namespace)
            executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=4, initializer=join_namespace, initargs=(self.namespace,)
            )
            self.loop.set_default_executor(executor)
        except BaseException as exc:  # reported to start(): the loop never runs
            self._joined.set_exception(exc)
            return
        asyncio.set_event_loop(self.loop)
        self._joined.set_result(None)
        self.loop.run_forever()
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()

    async def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on this loop and await its result from the caller's loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=_COMMAND_TIMEOUT_S)


def join_namespace(namespace: str) -> None:
    """Move the calling thread into the named network namespace."""
    fd = os.open(f"/var/run/netns/{namespace}", os.O_RDONLY)
    try:
        set_namespace(fd, namespace)
    finally:
        os.close(fd)


def set_namespace(fd: int, what: str) -> None:
    """setns(2) for the calling thread (os.setns is Python 3.12+)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns into {what}: {os.strerror(errno)}")
