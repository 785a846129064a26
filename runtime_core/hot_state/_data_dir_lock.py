"""Exclusive use of a data directory by one runtime process with the embedded default.

Owns `DataDirLock`: an advisory `flock` on `<data dir>/runtime.lock` holding the owner's pid.
The lock is the kernel's, so it is released when its owner dies however it dies (SIGKILL
included): a stale lock file never blocks a restart, and a live owner is refused with its pid
in the error. Must not start or stop anything.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from runtime_core.errors import ConflictError

LOCK_FILE = "runtime.lock"


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        """Hold the lock; ConflictError naming the live owner when another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ConflictError(
                f"Data directory '{self.path.parent}' is in use by another mcp-runtime process "
                f"(pid {owner}) that runs its embedded Redis.",
                hint="Stop that process, pass another --data-dir, or share its Redis by setting "
                "REDIS_URL (with the same data directory only for runtime-instance processes).",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
