"""The data directory must accept a write: checked at start-up (typed error) and by readiness."""

from __future__ import annotations

import os
from pathlib import Path

from runtime_core.errors import RuntimeCoreError

_PROBE_PREFIX = ".write-probe-"


class DataDirectoryError(RuntimeCoreError):
    """The data directory cannot be created or written (read-only, full, wrong owner)."""

    code = "data_dir_unwritable"


def check_data_dir_writable(data_dir: Path) -> None:
    """Create `data_dir` if needed and write, sync and remove a probe file in it.

    Raises DataDirectoryError naming the directory (never a raw OSError / sqlite3 error).
    """
    probe = Path(data_dir) / f"{_PROBE_PREFIX}{os.getpid()}"
    blocking = _existing_non_directory(Path(data_dir))
    if blocking is not None:
        raise DataDirectoryError(
            f"The data directory {data_dir} cannot be created: {blocking} is a file, not a directory.",
            hint="Pass a directory with --data-dir (or MCP_RUNTIME_DATA_DIR), e.g. a new folder "
            f"next to it, or move {blocking} away.",
        )
    try:
        Path(data_dir).mkdir(parents=True, exist_ok=True)
        with probe.open("wb") as handle:
            handle.write(b"ok")
            handle.flush()
            os.fsync(handle.fileno())
        probe.unlink()
    except OSError as exc:
        raise DataDirectoryError(
            f"The data directory {data_dir} is not writable: {exc.strerror or exc}.",
            hint="Pass a writable directory with --data-dir (or MCP_RUNTIME_DATA_DIR), or fix its "
            "permissions / free space.",
        ) from exc


def _existing_non_directory(path: Path) -> Path | None:
    """`path` or the first of its parents that exists and is not a directory (mkdir would fail
    with a bare "File exists" / "Not a directory")."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None
