"""Provider-key rate limits of steps: take a unit before a step calls its provider.

Owns `StepRateLimiter`, the typed wrapper of `lua/flow_rate_limit.lua` (the only place that
knows its KEYS/ARGV): a step whose `config.provider` belongs to a budget of the providers
file's `rate_limits` takes one unit from that budget before it is claimed; a refusal says
how long to wait, and the engine then keeps the step Ready (no attempt is spent, it is not a
failure). Each budget has its own hash tag, so budgets spread over a Redis Cluster. Must not
claim or run steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.flow._declarations import ProviderRateLimits
from runtime_core.flow._rate_limits import GcraCell, retry_after_ms
from runtime_core.flow._submit_limits import cells_json
from runtime_core.hot_state import HotState

BUDGET_TAG = "flow-rate"


@dataclass(frozen=True)
class StepRateRefusal:
    """The budget refused a call: its name, what it allows, and when to try again."""

    budget: str
    limit: str
    retry_after_ms: int


class StepRateLimiter:
    def __init__(self, hot_state: HotState, limits: ProviderRateLimits) -> None:
        self._hot_state = hot_state
        self._limits = limits

    def limits(self, provider: str | None) -> bool:
        """Whether calls of the provider entry `provider` take from a budget."""
        return self._limits.of_provider(provider) is not None

    def key(self, budget: str) -> str:
        return self._hot_state.tagged(f"{BUDGET_TAG}:{budget}", "cells")

    async def take(self, provider: str | None) -> StepRateRefusal | None:
        """One unit of the provider's budget (None: taken, or the provider has no budget)."""
        found = self._limits.of_provider(provider)
        if found is None:
            return None
        budget, limit = found
        cell = GcraCell(field="calls", label=budget, limit=limit)
        reply = await self._hot_state.scripts["flow_rate_limit"](
            keys=[self.key(budget)], args=[cells_json([cell])]
        )
        if int(reply[0]) == 1:
            return None
        return StepRateRefusal(budget, limit.describe(), retry_after_ms(int(reply[1])))
