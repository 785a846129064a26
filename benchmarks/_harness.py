"""Shared benchmark plumbing: a private redis-server, round-trip counting, percentiles, tables."""

from __future__ import annotations

import json
import platform
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import Connection

from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state


class RoundTripCounter:
    """Counts client round trips: one per packed send (a pipeline is one round trip)."""

    sends = 0


class CountingConnection(Connection):
    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        RoundTripCounter.sends += 1
        await super().send_packed_command(command, check_health)


def counting_hot_state(url: str, prefix: str) -> HotState:
    return connect_hot_state(url, prefix, connection_class=CountingConnection)


@contextmanager
def counting_every_connection() -> Iterator[None]:
    """Count the round trips of every redis.asyncio connection in this process, including the
    ones a RuntimeServices stack opened itself (it builds its own clients)."""
    original = Connection.send_packed_command

    async def counted(self: Connection, command: Any, check_health: bool = True) -> None:
        RoundTripCounter.sends += 1
        await original(self, command, check_health)

    Connection.send_packed_command = counted  # type: ignore[method-assign]
    try:
        yield
    finally:
        Connection.send_packed_command = original  # type: ignore[method-assign]


@contextmanager
def private_redis() -> Iterator[EmbeddedRedis]:
    with tempfile.TemporaryDirectory(prefix="mcprt-bench-") as tmp:
        server = EmbeddedRedis(Path(tmp), appendonly=False).start()
        try:
            yield server
        finally:
            server.stop()


async def script_calls(redis: Redis) -> int:
    """EVALSHA + EVAL calls so far (INFO commandstats): the scripted transitions executed."""
    stats = await redis.info("commandstats")
    return sum(int(stats.get(k, {}).get("calls", 0)) for k in ("cmdstat_evalsha", "cmdstat_eval"))


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


@dataclass
class Row:
    benchmark: str
    variant: str
    steps: int
    seconds: float
    steps_per_s: float
    round_trips_per_step: float
    scripts_per_step: float
    p50_ms: float
    p99_ms: float
    ratio: float | None = None
    baseline: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def machine_note() -> str:
    import os

    return f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"


def print_table(rows: list[Row]) -> None:
    header = (
        "benchmark",
        "variant",
        "ratio",
        "steps/s",
        "RT/step",
        "EVALSHA/step",
        "p50 ms",
        "p99 ms",
        "steps",
        "extra",
    )
    lines = [header]
    for r in rows:
        ratio = f"{r.ratio:.2f}x {r.baseline}" if r.ratio is not None else "-"
        lines.append(
            (
                r.benchmark,
                r.variant,
                ratio,
                f"{r.steps_per_s:,.0f}",
                f"{r.round_trips_per_step:.2f}",
                f"{r.scripts_per_step:.2f}",
                f"{r.p50_ms:.2f}",
                f"{r.p99_ms:.2f}",
                str(r.steps),
                ", ".join(f"{k}={v:,.0f}" for k, v in r.extra.items()),
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)))


def write_json(rows: list[Row], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"machine": machine_note(), "rows": [asdict(r) for r in rows]}
    path.write_text(json.dumps(body, indent=2), encoding="utf-8")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0
