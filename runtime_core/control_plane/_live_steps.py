"""The live part of `run.status` step rows: a streaming step's partial output, an agent's sub-steps.

Owns reading them from the execution's hot state (one read of the live-output hash while a
step runs, one of the journal per `ai.agent` step) into the rows. Must not change any state.
"""

from __future__ import annotations

from runtime_core.agents import AGENT_STEP_KEY, read_sub_steps
from runtime_core.control_plane._views import RunStatusView
from runtime_core.dag import DagStore, read_live_output


async def fill_live_steps(view: RunStatusView, store: DagStore, execution_id: str) -> None:
    if any(row.status == "Running" for row in view.steps):
        outputs = await read_live_output(store, execution_id)
        for row in view.steps:
            if row.status == "Running" and row.name in outputs:
                row.output, row.output_length = outputs[row.name]
    for row in view.steps:
        if row.step_key == AGENT_STEP_KEY:
            sub_steps = await read_sub_steps(store, execution_id, row.name)
            row.agent = [sub_step.view() for sub_step in sub_steps] or None
