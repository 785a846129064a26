"""The limits of one agent step: model turns, tokens, cost and wall time, and what was spent.

Owns `Spent` (the totals of the model turns recorded so far, replayed ones included, so a
resumed agent counts what it spent before the crash) and `AgentLimitGuard`, which raises the
typed failure of an exceeded limit before the next model turn and bounds a model call by the
wall time left. Must not call anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.agents._config import AgentLimits, Pricing
from runtime_core.policy import COST_LIMIT, TIME_LIMIT, TOKEN_LIMIT, TURN_LIMIT
from runtime_core.steps import StepFailure


@dataclass
class Spent:
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, usage: dict[str, int] | None) -> None:
        self.turns += 1
        if usage:
            self.input_tokens += int(usage.get("inputTokens", 0))
            self.output_tokens += int(usage.get("outputTokens", 0))

    def cost(self, pricing: Pricing | None) -> float | None:
        return None if pricing is None else round(pricing.cost(self.input_tokens, self.output_tokens), 6)


class AgentLimitGuard:
    def __init__(self, limits: AgentLimits, pricing: Pricing | None, step_name: str) -> None:
        self.limits = limits
        self.pricing = pricing
        self.step_name = step_name

    def before_turn(self, spent: Spent, started_at_ms: int, now_ms: int) -> None:
        """Raise the failure of the first limit the next model turn would break."""
        limits, what = self.limits, f"agent step {self.step_name!r}"
        if spent.turns >= limits.max_turns:
            raise StepFailure(
                f"{what} used its {limits.max_turns} model turns without a final answer", code=TURN_LIMIT
            )
        if limits.max_tokens is not None and spent.tokens >= limits.max_tokens:
            raise StepFailure(
                f"{what} used {spent.tokens} tokens, its limit is {limits.max_tokens}", code=TOKEN_LIMIT
            )
        cost = spent.cost(self.pricing)
        if limits.max_cost_usd is not None and cost is not None and cost >= limits.max_cost_usd:
            raise StepFailure(
                f"{what} spent {cost:.6f} USD, its budget is {limits.max_cost_usd} USD", code=COST_LIMIT
            )
        self._check_time(started_at_ms, now_ms)

    def _check_time(self, started_at_ms: int, now_ms: int) -> None:
        if (
            self.limits.max_wall_time_ms is not None
            and now_ms - started_at_ms >= self.limits.max_wall_time_ms
        ):
            raise self.time_exceeded(now_ms - started_at_ms)

    def time_exceeded(self, elapsed_ms: int) -> StepFailure:
        return StepFailure(
            f"agent step {self.step_name!r} ran {elapsed_ms} ms, its wall-time limit is "
            f"{self.limits.max_wall_time_ms} ms",
            code=TIME_LIMIT,
        )

    def seconds_left(self, started_at_ms: int, now_ms: int) -> float | None:
        """Wall time left for a call (None: unlimited)."""
        if self.limits.max_wall_time_ms is None:
            return None
        return max(0.001, (started_at_ms + self.limits.max_wall_time_ms - now_ms) / 1000)
