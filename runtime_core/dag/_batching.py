"""ClaimSizer: how many steps a worker claims per round trip, from what it has measured.

A worker reports the steps it executed together with its next claim in one scripted call
(`advance_steps`), so a batch of n steps costs one round trip instead of 2n. Batching pays
only while executing the batch takes about as long as the round trip it saves: a batch of
slow steps would hold claims (and their leases) that idle workers elsewhere could run. The
sizer keeps moving averages of one step's execution time and one call's round trip and
claims about `round trip / step time` steps (at least 1, at most `max_batch`). Must not
touch Redis nor decide which steps are claimed.
"""

from __future__ import annotations

from dataclasses import dataclass

SMOOTHING = 0.2  # weight of the newest sample in the moving averages


@dataclass
class ClaimSizer:
    max_batch: int
    step_ms: float | None = None
    call_ms: float | None = None

    def record_step(self, elapsed_ms: float) -> None:
        self.step_ms = _averaged(self.step_ms, elapsed_ms)

    def record_call(self, elapsed_ms: float) -> None:
        self.call_ms = _averaged(self.call_ms, elapsed_ms)

    def size(self) -> int:
        """1 until both averages exist; then the steps that execute in about one round trip."""
        if self.max_batch <= 1 or self.step_ms is None or self.call_ms is None:
            return 1
        fitting = int(self.call_ms / max(self.step_ms, 1e-3))
        return max(1, min(self.max_batch, fitting))


def _averaged(average: float | None, sample: float) -> float:
    return sample if average is None else average + SMOOTHING * (sample - average)
