"""A private `redis-server` child process for the zero-configuration default and tests.

Durability the runtime needs from any Redis it uses (embedded or REDIS_URL):
`appendonly yes` with `appendfsync everysec`. Redis appends a write to the AOF file before
it replies (unless a slow disk postpones it), so an acknowledged transition survives a
redis-server crash (SIGKILL) and restart; about the last second can be lost when the whole
machine fails. The embedded default starts with exactly these settings; configure a
production Redis the same way.

One server per data directory: the server's pid and port are kept in
`<dir>/embedded-redis.json`. A start that finds that server still running (its owner was
killed and it survived as an orphan) adopts it when it answers, or stops it by its pid when
it does not (or runs on another port than asked), then starts afresh on the same AOF. A pid
is only trusted while it is a `redis-server` working in this directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from runtime_core.errors import StoreUnavailableError

STATE_FILE = "embedded-redis.json"
REDIS_SERVER_ENV = "MCP_RUNTIME_REDIS_SERVER"
# Where package managers put redis-server; a desktop MCP host often starts its servers with a PATH
# that holds none of these folders.
WELL_KNOWN_DIRS = ("/usr/bin", "/usr/local/bin", "/opt/homebrew/bin", "/usr/sbin", "/snap/bin")


def find_redis_server(environ: dict[str, str] | None = None) -> str:
    """The redis-server to start: $MCP_RUNTIME_REDIS_SERVER, else the one on PATH, else one in a
    well-known folder. Raises StoreUnavailableError saying which of these to fix."""
    environ = dict(os.environ) if environ is None else environ
    named = environ.get(REDIS_SERVER_ENV)
    if named:
        if os.path.isfile(named) and os.access(named, os.X_OK):
            return named
        raise StoreUnavailableError(
            f"{REDIS_SERVER_ENV}={named} is not an executable file.",
            hint=f"Point {REDIS_SERVER_ENV} at the redis-server binary (`command -v redis-server`), "
            "or set REDIS_URL to use a running Redis.",
        )
    found = shutil.which("redis-server", path=environ.get("PATH")) or shutil.which(
        "redis-server", path=os.pathsep.join(WELL_KNOWN_DIRS)
    )
    if found is None:
        raise StoreUnavailableError(
            f"redis-server was not found on PATH ({environ.get('PATH', '')}) nor in "
            f"{', '.join(WELL_KNOWN_DIRS)}.",
            hint="Install it (apt-get install -y redis-server, brew install redis); if it is installed "
            f"elsewhere, set {REDIS_SERVER_ENV}=/path/to/redis-server (an MCP host: in the server "
            "entry's `env`), or set REDIS_URL to use a running Redis.",
        )
    return found


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
        self._requested_port = port
        self.port = port or find_free_port()
        self.appendonly = appendonly
        self.extra_args = tuple(extra_args)
        self._process: subprocess.Popen[bytes] | None = None
        self._adopted_pid: int | None = None  # a predecessor's server this object now owns

    @property
    def pid(self) -> int | None:
        if self._process is not None:
            return self._process.pid
        return self._adopted_pid

    @property
    def adopted(self) -> bool:
        """True when `start()` took over a server a killed predecessor left running."""
        return self._adopted_pid is not None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        binary = find_redis_server()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._adopt_survivor():
            return self
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
        self._write_state()
        return self

    def _adopt_survivor(self) -> bool:
        """Adopt this directory's server left by a killed owner, or stop it; True when adopted."""
        state = self._read_state()
        if state is None or not _is_redis_working_in(state["pid"], self.data_dir):
            return False
        same_port = self._requested_port in (None, state["port"])
        if same_port and _answers_ping(state["port"]):
            self.port, self._adopted_pid = state["port"], state["pid"]
            return True
        _stop_pid(state["pid"])
        return False

    @property
    def _state_path(self) -> Path:
        return self.data_dir / STATE_FILE

    def _read_state(self) -> dict[str, int] | None:
        try:
            raw = json.loads(self._state_path.read_text(encoding="utf-8"))
            return {"pid": int(raw["pid"]), "port": int(raw["port"])}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_state(self) -> None:
        if self._process is not None:
            state = {"pid": self._process.pid, "port": self.port}
            self._state_path.write_text(json.dumps(state), encoding="utf-8")

    def _forget_state(self) -> None:
        state = self._read_state()
        if state is not None and state["pid"] == self.pid:
            self._state_path.unlink(missing_ok=True)

    def _wait_until_accepting(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise StoreUnavailableError(f"redis-server exited with code {self._process.returncode}.")
            if _answers_ping(self.port, timeout_s=0.2):
                return
            time.sleep(0.02)  # polling a child process's socket, not synchronising our own code
        raise StoreUnavailableError(f"redis-server did not accept connections on port {self.port}.")

    def kill(self) -> None:
        """SIGKILL, for fault-injection tests."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
        elif self._adopted_pid is not None:
            _signal_pid(self._adopted_pid, signal.SIGKILL)
            _wait_gone(self._adopted_pid, 10)

    def stop(self) -> None:
        if self._adopted_pid is not None:
            self._forget_state()
            _stop_pid(self._adopted_pid)
            self._adopted_pid = None
        if self._process is None:
            return
        self._forget_state()
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        self._process = None


def _is_redis_working_in(pid: int, directory: Path) -> bool:
    """True while `pid` is a redis-server whose working directory is `directory` (its --dir)."""
    proc = Path("/proc") / str(pid)
    try:
        cmdline = (proc / "cmdline").read_bytes()
        return b"redis-server" in cmdline and (proc / "cwd").readlink() == directory.resolve()
    except OSError:
        return False


def _answers_ping(port: int, *, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _signal_pid(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while Path(f"/proc/{pid}").exists() and _state_of(pid) != "Z":
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)  # polling another process (not our child: no wait() for it)
    return True


def _state_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _stop_pid(pid: int) -> None:
    """SIGTERM a server this process did not start (its AOF is flushed), SIGKILL if it hangs.

    A paused (SIGSTOPped) server is continued first, or it could not act on the SIGTERM."""
    _signal_pid(pid, signal.SIGCONT)
    _signal_pid(pid, signal.SIGTERM)
    if not _wait_gone(pid, 10):
        _signal_pid(pid, signal.SIGKILL)
        _wait_gone(pid, 10)
