"""Loads every `lua/*.lua` file once and exposes it as a registered redis-py Script.

`lua/` is the repository's top-level folder of scripts; a wheel ships it as the data package
`runtime_core.hot_state.lua` (see `runtime_core.package_data`). A line `-- include: <name>`
is replaced by `lua/lib/<name>.lua` before the script is registered (`script_source`): Lua
shared by several transitions (the queue clock, the pending-item index) is written once. A
library names the keys it touches as `KEYS[NAME]`; the including script binds each NAME to
its position (`local NAME = 6`) before the include line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from runtime_core.hot_state._guard import reply_error
from runtime_core.package_data import shipped_folder

LUA_DIR = shipped_folder("lua", "runtime_core.hot_state.lua")
SCRIPT_CALL_ATTEMPTS = 3
_INCLUDE = re.compile(r"^-- include: (\w+)$", re.MULTILINE)


def script_source(path: Path) -> str:
    """The text Redis runs for the script at `path`: its `-- include: <name>` lines replaced by
    `lib/<name>.lua` of the same folder (one level: a library includes nothing)."""
    library = path.parent / "lib"

    def included(match: re.Match[str]) -> str:
        return (library / f"{match.group(1)}.lua").read_text(encoding="utf-8").rstrip("\n")

    return _INCLUDE.sub(included, path.read_text(encoding="utf-8"))


class ReloadingScript:
    """A registered script whose call survives a Redis restart racing the script reload.

    redis-py reloads a script once on NOSCRIPT; when Redis restarts again between that
    reload and the retried EVALSHA, NOSCRIPT escapes. NOSCRIPT means the script did not
    run, so calling again (which reloads again) is always safe.
    """

    def __init__(self, script: AsyncScript) -> None:
        self._script = script

    @property
    def sha(self) -> str:
        return self._script.sha

    async def __call__(
        self, keys: Sequence[Any] | None = None, args: Sequence[Any] | None = None, client: Any = None
    ) -> Any:
        for _ in range(SCRIPT_CALL_ATTEMPTS - 1):
            try:
                return await self._script(keys=keys, args=args, client=client)
            except NoScriptError:
                continue
        return await self._script(keys=keys, args=args, client=client)

    def queue(self, pipe: Any, keys: Sequence[Any], args: Sequence[Any]) -> None:
        """Add a call to a non-transactional pipeline; read its reply with `settle`."""
        # execute_command: redis-py blocks the evalsha method (not the command) on cluster pipelines
        pipe.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)

    async def settle(self, keys: Sequence[Any], args: Sequence[Any], reply: Any) -> Any:
        """The reply of a queued call (its pipeline executed with `raise_on_error=False`).

        NOSCRIPT (Redis restarted: the script did not run) calls it again, directly; any other
        error is raised (see `reply_error`)."""
        if isinstance(reply, NoScriptError):
            return await self(keys=keys, args=args)
        if isinstance(reply, BaseException):
            raise reply_error("pipelined EVALSHA", reply)
        return reply


class LuaScripts:
    """Registry of the project's Lua scripts keyed by file stem (`claim_steps`, ...)."""

    def __init__(self, redis: Redis, lua_dir: Path = LUA_DIR) -> None:
        self._lua_dir = lua_dir
        self._scripts: dict[str, ReloadingScript] = {}
        self._sources: dict[str, str] = {}
        for path in sorted(lua_dir.glob("*.lua")):
            source = script_source(path)
            self._sources[path.stem] = source
            self._scripts[path.stem] = ReloadingScript(redis.register_script(source))

    def __getitem__(self, name: str) -> ReloadingScript:
        try:
            return self._scripts[name]
        except KeyError:
            raise KeyError(f"No Lua script named {name!r} in {self._lua_dir}") from None

    def source(self, name: str) -> str:
        """The script's text, for EVAL inside a pipeline (EVAL never fails with NOSCRIPT)."""
        self[name]
        return self._sources[name]

    def names(self) -> list[str]:
        return sorted(self._scripts)
