"""How long a process leaves a runtime instance alone after a dispatch to it got no answer.

Owns one process's memory of the instances its dispatches could not reach (a transport
failure: refused, timed out, reset, or a 5xx without a runtime error) and the back-off before
it offers them runs again: FIRST_BACKOFF_S after the first failure, doubling up to
MAX_BACKOFF_S, forgotten at the first answer. Without it a control plane cut off from one
instance that still heartbeats (a partition between the two hosts only) chose it again for
every run, each dispatch failing, about a hundred a second. Must not judge an instance's
health: that is the registry's heartbeat, shared by every process, and an instance one
control plane cannot reach may serve the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 10.0


@dataclass
class _Silence:
    until: float
    delay_s: float


class UnansweredDispatches:
    def __init__(
        self,
        *,
        first_s: float = FIRST_BACKOFF_S,
        max_s: float = MAX_BACKOFF_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.clock = clock
        self._silent: dict[str, _Silence] = {}

    def unanswered(self, runtime_instance_id: str) -> float:
        """A dispatch got no answer: back off (longer each time in a row); the back-off in s."""
        previous = self._silent.get(runtime_instance_id)
        delay = self.first_s if previous is None else min(previous.delay_s * 2, self.max_s)
        self._silent[runtime_instance_id] = _Silence(self.clock() + delay, delay)
        return delay

    def answered(self, runtime_instance_id: str) -> None:
        self._silent.pop(runtime_instance_id, None)

    def reaches(self, runtime_instance_id: str) -> bool:
        """False while backing off (the next attempt after it may be tried)."""
        silence = self._silent.get(runtime_instance_id)
        return silence is None or self.clock() >= silence.until
