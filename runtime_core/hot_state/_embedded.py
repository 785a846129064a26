"""A private `redis-server` child process for the zero-configuration default and tests.

Durability the runtime needs from any Redis it uses (embedded or REDIS_URL):
`appendonly yes` with `appendfsync everysec`. Redis appends a write to the AOF file before
it replies (unless a slow disk postpones it), so an acknowledged transition survives a
redis-server crash (SIGKILL) and restart; about the last second can be lost when the whole
machine fails. The embedded default starts with exactly these settings; configure a
production Redis the same way.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from runtime_core.errors import StoreUnavailableError


def find_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedRedis:
    """Starts `redis-server` on 127.0.0.1 and a free port; stops it on `stop()`.

    `appendonly` defaults to on with `appendfsync everysec`: the durability the runtime
    needs so a Redis restart does not lose acknowledged transitions.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        appendonly: bool = True,
        extra_args: Sequence[str] = (),
    ) -> None:
        """`extra_args` are more `redis-server` options, e.g. a Redis Cluster node's."""
        self.data_dir = Path(data_dir)
        self.port = port or find_free_port()
        self.appendonly = appendonly
        self.extra_args = tuple(extra_args)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StoreUnavailableError(
                "redis-server is not installed.",
                hint="Install it (apt-get install -y redis-server) or set REDIS_URL.",
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(self.data_dir),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "everysec",
            *self.extra_args,
        ]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_until_accepting(timeout_s)
        return self

    def _wait_until_accepting(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise StoreUnavailableError(f"redis-server exited with code {self._process.returncode}.")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)  # polling a child process's socket, not synchronising our own code
        raise StoreUnavailableError(f"redis-server did not accept connections on port {self.port}.")

    def kill(self) -> None:
        """SIGKILL, for fault-injection tests."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)

    def stop(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        self._process = None
