"""Time-window rate limits: the declaration, its GCRA parameters and the typed refusal.

Owns `RateLimit` (`limit` runs or calls per `period`, at most `burst` at once), the
generic cell rate algorithm parameters the Lua scripts use (`lib/gcra.lua`: an emission
interval and a tolerance in microseconds of the Redis server clock), the `GcraCell` a script
call takes a unit from, and `RateLimitedError` (`[rate_limited]`, with the time to retry).
Must not touch Redis.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime_core.errors import RuntimeCoreError

_PERIOD = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_PERIOD_MS = 7 * 86_400_000
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"


def period_ms(period: str) -> int:
    """`"500ms"`, `"1s"`, `"1m"`, `"1h"`, `"1d"` in milliseconds; ValueError otherwise."""
    match = _PERIOD.match(period)
    if match is None:
        raise ValueError(f"period {period!r} is not a number and a unit (ms, s, m, h, d), e.g. '1m'")
    value = int(match.group(1)) * _UNIT_MS[match.group(2)]
    if not 1 <= value <= MAX_PERIOD_MS:
        raise ValueError(f"period {period!r} must be between 1ms and 7d")
    return value


class RateLimit(BaseModel):
    """`limit` units per `period`, spread evenly (GCRA); `burst` of them may go at once.

    In any window of one period at most `limit + burst - 1` units pass; with the default burst
    of 1, at most `limit` (one every period / limit).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    limit: int = Field(ge=1, le=1_000_000)
    period: str
    burst: int = Field(default=1, ge=1, le=1_000_000)

    @field_validator("period")
    @classmethod
    def _known_period(cls, value: str) -> str:
        period_ms(value)
        return value

    @property
    def period_ms(self) -> int:
        return period_ms(self.period)

    @property
    def interval_us(self) -> int:
        """The emission interval: one unit every period / limit (rounded up: never more)."""
        return max(1, math.ceil(self.period_ms * 1000 / self.limit))

    @property
    def tolerance_us(self) -> int:
        return (self.burst - 1) * self.interval_us

    def describe(self) -> str:
        burst = f", burst {self.burst}" if self.burst > 1 else ""
        return f"{self.limit} per {self.period}{burst}"


class NamedRateLimit(RateLimit):
    """A rate limit with the name a configuration file gives it (unique where it is declared).

    `at`: `submit` refuses a submit over the limit (`[rate_limited]`); `dispatch` accepts the
    run and dispatches the tenant's runs no faster than the limit (tenant limits only)."""

    name: str = Field(pattern=NAME_PATTERN)
    at: Literal["submit", "dispatch"] = "submit"


class GcraCell(BaseModel):
    """One limit as a script takes from it: the field of its state in a rates hash, and its
    parameters. `label` names it in a refusal (never a secret)."""

    model_config = ConfigDict(frozen=True)

    field: str
    label: str
    limit: RateLimit

    def argument(self) -> list[str | int]:
        return [self.field, self.limit.interval_us, self.limit.tolerance_us]


class RateLimitedError(RuntimeCoreError):
    """A rate limit refused the request; nothing was done. Retry after `retry_after_ms`."""

    code = "rate_limited"

    def __init__(self, what: str, label: str, retry_after_ms: int) -> None:
        super().__init__(
            f"{what} was refused by the rate limit {label}: nothing was done. "
            f"Retry in {retry_after_ms / 1000:.3f} s (retry_after_ms={retry_after_ms}).",
            hint=f"Wait retry_after_ms={retry_after_ms} before retrying, or raise the limit "
            "(docs/flow-control.md).",
        )
        self.label = label
        self.retry_after_ms = retry_after_ms

    def to_dict(self) -> dict[str, str]:
        return {**super().to_dict(), "retry_after_ms": str(self.retry_after_ms)}


def retry_after_ms(wait_us: int) -> int:
    """A script's wait in microseconds as whole milliseconds, rounded up (at least 1)."""
    return max(1, math.ceil(wait_us / 1000))
