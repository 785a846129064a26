"""Deterministic jitter: the same seed always spreads a delay the same way.

Owns the only jitter function of the runtime. Must never use `random` or the clock: replays
and fingerprints depend on identical delays for identical seeds.
"""

from __future__ import annotations

import hashlib


def seeded_unit_interval(seed: str) -> float:
    """A stable number in [0, 1) derived from a SHA-256 of `seed`."""
    digest = hashlib.sha256(seed.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def jittered_delay_ms(delay_ms: int, seed: str) -> int:
    """Equal jitter: a delay in [ceil(delay/2), delay], picked by `seed`."""
    floor_ms = (delay_ms + 1) // 2
    spread_ms = delay_ms - floor_ms
    return floor_ms + int(seeded_unit_interval(seed) * (spread_ms + 1))
