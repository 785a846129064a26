"""Loads every `lua/*.lua` file once and exposes it as a registered redis-py Script."""

from __future__ import annotations

from pathlib import Path

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

LUA_DIR = Path(__file__).resolve().parents[2] / "lua"


class LuaScripts:
    """Registry of the project's Lua scripts keyed by file stem (`claim_steps`, ...)."""

    def __init__(self, redis: Redis, lua_dir: Path = LUA_DIR) -> None:
        self._scripts: dict[str, AsyncScript] = {}
        for path in sorted(lua_dir.glob("*.lua")):
            self._scripts[path.stem] = redis.register_script(path.read_text(encoding="utf-8"))

    def __getitem__(self, name: str) -> AsyncScript:
        try:
            return self._scripts[name]
        except KeyError:
            raise KeyError(f"No Lua script named {name!r} in {LUA_DIR}") from None

    def names(self) -> list[str]:
        return sorted(self._scripts)
