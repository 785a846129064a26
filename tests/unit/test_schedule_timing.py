"""Schedule tick arithmetic on croniter with fixed instants: zones and daylight-saving changes,
6-field cron, intervals, and what each catch-up policy plans after a downtime."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from runtime_core.errors import InvalidArgumentError
from runtime_core.scheduling import PlannedTick, ScheduleSpec, TickClock, parse_spec, plan_ticks

BERLIN = ZoneInfo("Europe/Berlin")


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _local(ms: int, zone: ZoneInfo = BERLIN) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=zone).isoformat()


def _clock(anchor: datetime = datetime(2025, 1, 1, tzinfo=UTC), **spec: object) -> TickClock:
    return TickClock(ScheduleSpec.model_validate(spec), _ms(anchor))


def test_a_daily_time_skipped_by_the_spring_change_fires_at_the_first_valid_time_after_it() -> None:
    clock = _clock(cron="30 2 * * *", timezone="Europe/Berlin")
    start = _ms(datetime(2025, 3, 29, 12, 0, tzinfo=BERLIN))  # 2025-03-30 02:00 -> 03:00 in Berlin
    ticks = clock.ticks_between(start, _ms(datetime(2025, 4, 1, 12, 0, tzinfo=BERLIN)))
    assert [_local(t) for t in ticks] == [
        "2025-03-30T03:00:00+02:00",
        "2025-03-31T02:30:00+02:00",
        "2025-04-01T02:30:00+02:00",
    ]


def test_a_daily_time_repeated_by_the_autumn_change_fires_in_both_offsets() -> None:
    clock = _clock(cron="30 2 * * *", timezone="Europe/Berlin")
    start = _ms(datetime(2025, 10, 25, 12, 0, tzinfo=BERLIN))  # 2025-10-26 03:00 -> 02:00 in Berlin
    ticks = clock.ticks_between(start, _ms(datetime(2025, 10, 27, 12, 0, tzinfo=BERLIN)))
    assert [_local(t) for t in ticks] == [
        "2025-10-26T02:30:00+02:00",
        "2025-10-26T02:30:00+01:00",
        "2025-10-27T02:30:00+01:00",
    ]
    assert ticks[1] - ticks[0] == 3_600_000  # one real hour apart


def test_an_hourly_cron_counts_real_hours_across_the_autumn_change() -> None:
    clock = _clock(cron="0 * * * *", timezone="Europe/Berlin")
    start = _ms(datetime(2025, 10, 26, 0, 30, tzinfo=BERLIN))
    ticks = clock.ticks_between(start, start + 4 * 3_600_000)
    assert [b - a for a, b in pairwise(ticks)] == [3_600_000] * 3
    assert [_local(t) for t in ticks] == [
        "2025-10-26T01:00:00+02:00",
        "2025-10-26T02:00:00+02:00",
        "2025-10-26T02:00:00+01:00",
        "2025-10-26T03:00:00+01:00",
    ]


def test_a_zone_moves_the_utc_instant_of_a_local_time() -> None:
    after = _ms(datetime(2025, 7, 1, tzinfo=UTC))
    assert _local(
        _clock(cron="0 9 * * *", timezone="America/New_York").next_after(after), ZoneInfo("UTC")
    ) == ("2025-07-01T13:00:00+00:00")
    assert _local(_clock(cron="0 9 * * *").next_after(after), ZoneInfo("UTC")) == "2025-07-01T09:00:00+00:00"


def test_six_fields_put_seconds_first() -> None:
    clock = _clock(cron="*/15 * * * * *")
    start = _ms(datetime(2025, 1, 1, 0, 0, 1, tzinfo=UTC))
    assert [t - start for t in clock.ticks_between(start, start + 60_000)] == [14_000, 29_000, 44_000, 59_000]


def test_an_interval_ticks_from_its_anchor_and_the_latest_ticks_need_no_walk() -> None:
    anchor = datetime(2025, 1, 1, tzinfo=UTC)
    clock = _clock(anchor, interval_seconds=10)
    base = _ms(anchor)
    assert clock.next_after(base) == base + 10_000
    assert clock.next_after(base + 10_000) == base + 20_000
    assert clock.ticks_between(base + 5_000, base + 30_000) == [base + 10_000, base + 20_000, base + 30_000]
    year = 365 * 24 * 3600 * 1000
    assert clock.latest_between(base, base + year, 2) == [base + year - 10_000, base + year]


@pytest.mark.parametrize(
    ("catch_up", "expected_catch_up"),
    [("skip", []), ("run_once", [50_000]), ("backfill", [30_000, 40_000, 50_000])],
)
def test_after_a_downtime_each_catch_up_policy_plans_its_missed_ticks_then_the_on_time_ones(
    catch_up: str, expected_catch_up: list[int]
) -> None:
    anchor = datetime(2025, 1, 1, tzinfo=UTC)
    base = _ms(anchor)
    clock = _clock(anchor, interval_seconds=10, catch_up=catch_up, backfill_limit=3)
    # Last handled tick at +10 s; the scheduler comes back at +75 s with a 20 s misfire grace.
    planned = plan_ticks(clock, base + 10_000, base + 75_000, 20_000)
    assert planned == [
        *[PlannedTick(base + t, True) for t in expected_catch_up],
        PlannedTick(base + 60_000, False),
        PlannedTick(base + 70_000, False),
    ]


def test_without_a_downtime_every_due_tick_is_on_time() -> None:
    anchor = datetime(2025, 1, 1, tzinfo=UTC)
    base = _ms(anchor)
    clock = _clock(anchor, cron="* * * * * *", catch_up="skip")
    assert plan_ticks(clock, base + 1_000, base + 3_500, 60_000) == [
        PlannedTick(base + 2_000, False),
        PlannedTick(base + 3_000, False),
    ]


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"cron": "* * *"}, "has 3 fields"),
        ({"cron": "61 * * * *"}, "not a valid cron"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"cron": "* * * * *", "interval_seconds": 5}, "exactly one of"),
        ({}, "exactly one of"),
    ],
)
def test_a_bad_schedule_is_refused_with_what_to_fix(values: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        parse_spec(values)
