"""AssistingObserver: the engine events of an assisting instance's workers, named and counted.

Owns adding `assisting.runtime.instance.id` to every event the assisting workers emit (so the
ledger, trace and metrics of the assisting process say who ran the step) and counting the
steps they completed per execution (recorded when the assistant leaves). Must not drop or
reorder events.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from runtime_core.assistance._keys import ASSISTING_INSTANCE_ATTRIBUTE
from runtime_core.dag import EngineEvent, ExecutionObserver


class AssistingObserver:
    def __init__(self, inner: ExecutionObserver, runtime_instance_id: str) -> None:
        self.inner = inner
        self.runtime_instance_id = runtime_instance_id
        self.completed: Counter[str] = Counter()

    async def on_event(self, event: EngineEvent) -> None:
        if event.name == "step.completed":
            self.completed[event.execution_id] += 1
        named = {**event.attributes, ASSISTING_INSTANCE_ATTRIBUTE: self.runtime_instance_id}
        await self.inner.on_event(dataclasses.replace(event, attributes=named))

    def take_completed(self, execution_id: str) -> int:
        """Steps completed in `execution_id` since the last take (its assistant's stay)."""
        return self.completed.pop(execution_id, 0)
