"""What a schedule says: when it fires and what it does with missed or overlapping ticks.

Owns `ScheduleSpec` (a cron expression of 5 fields, or 6 with seconds first, in an IANA time
zone; or a fixed interval), its validation (a bad expression or zone is refused with what to
fix) and the catch-up and overlap policies. Must not compute ticks (`_timing`) or fire runs.
"""

from __future__ import annotations

from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from runtime_core.errors import InvalidArgumentError
from runtime_core.flow import MAX_PRIORITY, MIN_PRIORITY

MAX_BACKFILL = 1000


class CatchUpPolicy(StrEnum):
    """What a scheduler does with ticks missed while no scheduler ran (older than the misfire
    grace when first seen): `skip` them, fire the latest one `run_once`, or `backfill` the
    latest `backfill_limit` of them, each as its own run, oldest first."""

    SKIP = "skip"
    RUN_ONCE = "run_once"
    BACKFILL = "backfill"


class OverlapPolicy(StrEnum):
    """What a tick does while the schedule's previous run is still active: `allow` another run,
    `skip` the tick, `cancel_previous` then start, or `queue_one` (the tick waits and fires
    when the previous run ends; a tick coming while one waits is skipped)."""

    ALLOW = "allow"
    SKIP = "skip"
    CANCEL_PREVIOUS = "cancel_previous"
    QUEUE_ONE = "queue_one"


def cron_fields(expression: str) -> int:
    return len(expression.split())


def check_cron(expression: str) -> str:
    """The expression, or ValueError naming the accepted forms."""
    fields = cron_fields(expression)
    if fields not in (5, 6):
        raise ValueError(
            f"cron '{expression}' has {fields} fields; use 5 (minute hour day month weekday) or 6 "
            "(second minute hour day month weekday)"
        )
    if not croniter.is_valid(expression, second_at_beginning=fields == 6):
        raise ValueError(f"cron '{expression}' is not a valid cron expression")
    return expression


class ScheduleSpec(BaseModel):
    """When a schedule fires (exactly one of `cron` / `interval_seconds`) and its policies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cron: str | None = None
    interval_seconds: int | None = Field(default=None, ge=1, le=366 * 24 * 3600)
    timezone: str = "UTC"
    catch_up: CatchUpPolicy = CatchUpPolicy.RUN_ONCE
    backfill_limit: int = Field(default=10, ge=1, le=MAX_BACKFILL)
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    priority: int | None = Field(default=None, ge=MIN_PRIORITY, le=MAX_PRIORITY)

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value.strip())

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone '{value}'; use an IANA name such as 'Europe/Berlin'"
            ) from None
        return value

    @model_validator(mode="after")
    def _one_timing(self) -> ScheduleSpec:
        if (self.cron is None) == (self.interval_seconds is None):
            raise ValueError("give exactly one of `cron` and `interval_seconds`")
        return self

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron '{self.cron}' ({self.timezone})"
        return f"every {self.interval_seconds} s"


def _problem(location: tuple[int | str, ...], message: str) -> str:
    where = ".".join(str(part) for part in location) or "schedule"
    return f"{where}: {message.removeprefix('Value error, ')}"


def parse_spec(values: dict[str, object]) -> ScheduleSpec:
    """A spec from untrusted values; InvalidArgumentError listing what to fix."""
    try:
        return ScheduleSpec.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(_problem(error["loc"], error["msg"]) for error in exc.errors())
        raise InvalidArgumentError(
            f"Invalid schedule: {problems}.", hint="Fix the schedule's timing or policies and send it again."
        ) from None
