"""The `run.status` answer of a run's view: shared by the tool, the `run://` resource and tasks.

Owns turning a runtime_core RunStatusView into the published RunStatusOutput (`done` decided by
the control plane's terminal rule, `run_is_done`). Must not look runs up.
"""

from __future__ import annotations

from mcp_runtime._outputs import RunStatusOutput
from runtime_core.control_plane import RunStatusView, run_is_done


def run_status_output(view: RunStatusView, *, include_steps: bool = True) -> RunStatusOutput:
    """The `run.status` answer for a run's view (`done` decided by the runtime's terminal rule)."""
    body = view.model_dump(exclude=set() if include_steps else {"steps"})
    return RunStatusOutput.model_validate({**body, "done": run_is_done(view)})
