"""A slow, lossy Ethernet switch in user space: the data centre's links when `tc netem` is missing.

This machine's kernel has no netem (nor any other delaying qdisc), so the slow-links
scenario sends the hosts' traffic through this process instead: it creates a TAP
interface `slow0` in every host namespace it is given, learns MAC addresses like a switch,
and forwards each frame after DELAY (frames leave in arrival order) unless it is lost
(LOSS percent, independently per frame). A host's traffic takes this path once routes to
its peers point at `slow0` (see `Network.slow_all`); removing them returns it to the
kernel bridge. Prints `ready` on stdout once every port is open; runs until killed.

    python -m tests.hosts.link_emulator --delay-ms 50 --loss-percent 1 NAMESPACE...
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import random
import struct
from collections import deque

from tests.hosts.network import LINK_EMULATOR_PORT, join_namespace, set_namespace

_TUNSETIFF = 0x400454CA
_IFF_TAP, _IFF_NO_PI = 0x0002, 0x1000
_MAX_FRAME = 65_536


def open_tap(namespace: str) -> int:
    """A TAP device `slow0` created inside `namespace` (the calling thread joins it first)."""
    join_namespace(namespace)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", LINK_EMULATOR_PORT.encode(), _IFF_TAP | _IFF_NO_PI))
    return fd


class Switch:
    def __init__(self, ports: list[int], delay_s: float, loss: float) -> None:
        self.ports = ports
        self.delay_s = delay_s
        self.loss = loss
        self.where: dict[bytes, int] = {}  # MAC -> port fd
        self.in_flight: deque[tuple[float, int, bytes]] = deque()  # due, port, frame: due order
        self.loop = asyncio.get_running_loop()

    def start(self) -> None:
        for port in self.ports:
            self.loop.add_reader(port, self._receive, port)

    def _receive(self, port: int) -> None:
        while True:
            try:
                frame = os.read(port, _MAX_FRAME)
            except BlockingIOError:
                return
            self.where[frame[6:12]] = port
            out = self.where.get(frame[0:6])
            targets = [out] if out is not None and not frame[0] & 1 else [p for p in self.ports if p != port]
            due = self.loop.time() + self.delay_s
            for target in targets:
                if random.random() >= self.loss:
                    self._schedule(due, target, frame)

    def _schedule(self, due: float, port: int, frame: bytes) -> None:
        if not self.in_flight:
            self.loop.call_at(due, self._deliver)
        self.in_flight.append((due, port, frame))

    def _deliver(self) -> None:
        now = self.loop.time()
        while self.in_flight and self.in_flight[0][0] <= now:
            _, port, frame = self.in_flight.popleft()
            try:
                os.write(port, frame)
            except OSError:
                pass  # a full TAP queue or a port going down loses the frame, as a wire would
        if self.in_flight:
            self.loop.call_at(self.in_flight[0][0], self._deliver)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--loss-percent", type=float, required=True)
    parser.add_argument("namespaces", nargs="+")
    args = parser.parse_args()
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    ports = [open_tap(namespace) for namespace in args.namespaces]
    set_namespace(home, "the namespace it started in")  # so no host counts it as its process
    os.close(home)
    Switch(ports, args.delay_ms / 1000, args.loss_percent / 100).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
