"""Times and durations as people read them: "1.2 s", "3 min 4 s", "2 h 5 min", "3 min ago".

Owns the one wording of durations and relative times shared by the dashboard (server side;
its JavaScript mirrors `duration_text` to keep running clocks ticking) and the run views, and
the exact UTC text shown beside or under them. Pure: no I/O, no clock of its own (callers pass
`now`).
"""

from __future__ import annotations

from datetime import UTC, datetime

_MINUTE, _HOUR, _DAY = 60, 3_600, 86_400


def duration_text(seconds: float | None) -> str:
    """`seconds` in the largest two units that matter: 850 ms, 4.2 s, 3 min 4 s, 2 h 5 min, 3 d 4 h."""
    if seconds is None:
        return "-"
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < _MINUTE:
        return f"{whole} s"
    if whole < _HOUR:
        return _two(whole // _MINUTE, "min", whole % _MINUTE, "s")
    if whole < _DAY:
        return _two(whole // _HOUR, "h", whole % _HOUR // _MINUTE, "min")
    return _two(whole // _DAY, "d", whole % _DAY // _HOUR, "h")


def _two(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big} {big_unit} {small} {small_unit}" if small else f"{big} {big_unit}"


def between(start: datetime | None, end: datetime | None) -> float | None:
    """Seconds from `start` to `end` (None when either is unknown)."""
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def relative_text(moment: datetime | None, now: datetime) -> str:
    """`moment` from `now`: "just now", "3 min ago", "2 h ago", "in 5 s" (a future retry)."""
    if moment is None:
        return "-"
    seconds = (now - moment).total_seconds()
    if abs(seconds) < 5:
        return "just now"
    if seconds < 0:
        return f"in {_coarse(-seconds)}"
    return f"{_coarse(seconds)} ago"


def _coarse(seconds: float) -> str:
    """One unit is enough for "how long ago": 12 s, 3 min, 5 h, 2 d."""
    whole = int(seconds)
    if whole < _MINUTE:
        return f"{whole} s"
    if whole < _HOUR:
        return f"{whole // _MINUTE} min"
    if whole < _DAY:
        return f"{whole // _HOUR} h"
    return f"{whole // _DAY} d"


def exact_text(moment: datetime | None, *, milliseconds: bool = False) -> str:
    """The moment in UTC, e.g. `2026-12-04 21:15:03 UTC` (with `.123` when asked)."""
    if moment is None:
        return "-"
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if milliseconds else utc.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text} UTC"


def clock_text(moment: datetime | None) -> str:
    """The time of day in UTC, e.g. `21:15` (for "waiting since 21:15")."""
    return moment.astimezone(UTC).strftime("%H:%M") if moment is not None else "-"


def iso_text(moment: datetime | None) -> str:
    """The machine-readable form a `<time datetime=...>` carries."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") if moment else ""
