"""RunEventObserver: the engine's execution events as run events.

Owns mapping engine events to run events: execution created / paused / resumed, a resume,
input or cancel a caller asked for (what wakes a parked run's instance), a step parked for
human input (waiting for input, durable), step completed / failed and a streaming step's
new output (progress, buffered). The run's SharedRunId and LocalRunId are read once per execution from its
metadata and cached (a reassigned execution is read again). The end of a run is not
published here: the runtime instance publishes it once the local run is closed, so a
subscriber that reads the run on that event finds it done. Must never raise into the
engine: a failed publication is logged and dropped.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping

from runtime_core.dag import DagStore, EngineEvent
from runtime_core.errors import RuntimeCoreError
from runtime_core.events._models import RunEvent, RunEventType, run_event_id
from runtime_core.events._publisher import RunEventPublisher

log = logging.getLogger("runtime_core.events")

_STATUS_EVENTS = {
    "execution.created": (RunEventType.STARTED, "Running"),
    "execution.paused": (RunEventType.PAUSED, "Paused"),
    "execution.resumed": (RunEventType.RESUMED, "Running"),
    "step.parked": (RunEventType.WAITING_FOR_INPUT, "WaitingForInput"),
    "execution.resume_requested": (RunEventType.RESUME_REQUESTED, "Resuming"),
    "execution.input_submitted": (RunEventType.INPUT_SUBMITTED, "Resuming"),
    "execution.cancel_requested": (RunEventType.CANCEL_REQUESTED, "Cancelling"),
}
_STEP_EVENTS = {
    "step.completed": (RunEventType.STEP_COMPLETED, "Completed"),
    "step.failed": (RunEventType.STEP_FAILED, "Failed"),
    "step.output": (RunEventType.STEP_OUTPUT, "Running"),
}
_CACHED_EXECUTIONS = 4_096


class RunEventObserver:
    def __init__(self, publisher: RunEventPublisher, dag_store: DagStore) -> None:
        self.publisher = publisher
        self.dag_store = dag_store
        self._runs: OrderedDict[str, tuple[str | None, str | None]] = OrderedDict()

    async def on_event(self, event: EngineEvent) -> None:
        if event.name == "execution.reassigned":
            self._runs.pop(event.execution_id, None)
            return
        mapped = _STATUS_EVENTS.get(event.name) or _STEP_EVENTS.get(event.name)
        if mapped is None or event.snapshot is None:
            return
        try:
            run_event = await self._run_event(event, *mapped)
            if run_event.durable:  # a wait for input: to the stream, and sent now
                await self.publisher.publish(run_event)
            else:  # progress and the other status changes: batched with the process's others
                self.publisher.emit(run_event)
        except RuntimeCoreError as exc:  # an observer must never crash the engine's worker
            log.warning(
                "run_events.publish_failed",
                extra={"execution_id": event.execution_id, "event": event.name, "error": exc.message},
            )

    async def _run_event(self, event: EngineEvent, event_type: RunEventType, status: str) -> RunEvent:
        assert event.snapshot is not None
        if event.meta is not None:  # created just now: the event carries what was stored
            self._remember(event.execution_id, event.meta.attributes)
        shared_run_id, local_run_id = await self._identities(event.execution_id)
        waiting_key = event.attributes.get("waiting_key")
        return RunEvent(
            event_id=run_event_id(event_type, event.execution_id, event.step_name, waiting_key),
            type=event_type,
            tenant_id=event.snapshot.tenant_id,
            shared_run_id=shared_run_id,
            local_run_id=local_run_id,
            execution_id=event.execution_id,
            status=status,
            step=event.step_name,
            waiting_key=waiting_key,
            output=event.attributes.get("text") if event_type is RunEventType.STEP_OUTPUT else None,
        )

    async def _identities(self, execution_id: str) -> tuple[str | None, str | None]:
        cached = self._runs.get(execution_id)
        if cached is not None:
            self._runs.move_to_end(execution_id)
            return cached
        found = await self.dag_store.load_attributes(execution_id, "shared_run_id", "local_run_id")
        return self._remember(execution_id, found)

    def _remember(self, execution_id: str, found: Mapping[str, str | None]) -> tuple[str | None, str | None]:
        identities = (found.get("shared_run_id") or None, found.get("local_run_id") or None)
        self._runs[execution_id] = identities
        self._runs.move_to_end(execution_id)
        if len(self._runs) > _CACHED_EXECUTIONS:
            self._runs.popitem(last=False)
        return identities
