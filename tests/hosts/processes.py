"""The product's long-running processes on the data centre's hosts: `serve` and `runtime-instance`.

Owns one restartable child process per (host, role): its command line bound to the host's
address, its environment, one log file per life, a graceful stop (SIGTERM, then SIGKILL
after a grace) and what to show when it fails. Must not decide when anything happens.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.mcp_support import clean_environment, mcp_runtime_command
from tests.hosts.network import Host

SERVE_PORT = 8765
RUNTIME_PORT = 9100
STOP_GRACE_S = 20.0
LOG_TAIL_CHARS = 4000


@dataclass
class HostProcess:
    name: str  # the host's name: one product process per host
    host: Host
    argv: list[str]
    env: dict[str, str]
    log_dir: Path
    process: subprocess.Popen[bytes] | None = None
    lives: int = 0
    logs: list[Path] = field(default_factory=list)

    def start(self) -> None:
        assert not self.alive, f"{self.name} runs already"
        self.lives += 1
        log = self.log_dir / f"{self.name}-{self.lives}.log"
        self.logs.append(log)
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                self.host.exec_argv(self.argv), env=self.env, stdout=output, stderr=subprocess.STDOUT
            )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        """SIGTERM (a graceful stop: the process retires its work), SIGKILL after the grace."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_GRACE_S)
        code, self.process = self.process.returncode, None
        return code

    def forget(self) -> None:
        """After the process ended by itself or with its host: reap it."""
        if self.process is not None:
            self.process.wait(timeout=STOP_GRACE_S)
            self.process = None

    def rss_mb(self) -> float:
        """Resident memory now (the process runs as our child: `ip netns exec` execs it)."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def log_text(self) -> str:
        return self.logs[-1].read_text(encoding="utf-8", errors="replace") if self.logs else ""

    def log_tail(self) -> str:
        return f"--- {self.name} (life {self.lives}) ---\n{self.log_text()[-LOG_TAIL_CHARS:]}"


def control_plane(
    host: Host, data_dir: Path, config: Path, env: dict[str, str], log_dir: Path
) -> HostProcess:
    argv = [mcp_runtime_command(), "serve", "--transport", "http", "--host", host.address]
    argv += ["--port", str(SERVE_PORT), "--config", str(config), "--data-dir", str(data_dir)]
    # Each control plane names itself; instances run on hosts of their own, none here.
    own = {
        "MCP_RUNTIME_HOST": host.name,
        "MCP_RUNTIME_LOCAL_INSTANCES": "0",
        "MCP_RUNTIME_SCALE_OUT": "false",
    }
    return HostProcess(host.name, host, argv, clean_environment(**env, **own), log_dir)


def runtime_instance(
    host: Host, transport: str, data_dir: Path, options: dict[str, str], env: dict[str, str], log_dir: Path
) -> HostProcess:
    """`options`: runtime-instance options beyond the host's own (--redis-url, sizing, ...)."""
    argv = [mcp_runtime_command(), "runtime-instance", "--transport", transport]
    argv += ["--bind-host", host.address, "--port", str(RUNTIME_PORT), "--host-id", host.name]
    argv += ["--data-dir", str(data_dir)]
    for option, value in options.items():
        argv += [option, value]
    return HostProcess(host.name, host, argv, clean_environment(**env), log_dir)
