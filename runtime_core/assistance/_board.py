"""HelpBoard: the executions asking for assistance, one board per visibility scope.

Owns posting an execution on the boards of its scopes (an entry expires unless posted again),
withdrawing it, and reading one scope's boards (`assist_post` / `assist_wanted`). Boards are
separate hash slots: a post or read of several scopes runs one script per board, concurrently.
Must not decide which scopes an execution or an instance has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from runtime_core.assistance._keys import board_key
from runtime_core.hot_state import HotState


class HelpBoard:
    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state

    async def post(self, execution_id: str, scopes: Sequence[str], *, ttl_ms: int) -> None:
        await self._post_all(execution_id, scopes, ttl_ms)

    async def withdraw(self, execution_id: str, scopes: Sequence[str]) -> None:
        await self._post_all(execution_id, scopes, 0)

    async def _post_all(self, execution_id: str, scopes: Sequence[str], ttl_ms: int) -> None:
        post = self.hot_state.scripts["assist_post"]
        await asyncio.gather(
            *(post(keys=[board_key(self.hot_state, scope)], args=[execution_id, ttl_ms]) for scope in scopes)
        )

    async def wanted(self, scopes: Sequence[str], *, limit: int) -> list[str]:
        """The executions wanting help on these boards (each once, longest-wanted first per board)."""
        read = self.hot_state.scripts["assist_wanted"]
        replies = await asyncio.gather(
            *(read(keys=[board_key(self.hot_state, scope)], args=[limit]) for scope in scopes)
        )
        return list(dict.fromkeys(str(eid) for reply in replies for eid in reply[1:]))
