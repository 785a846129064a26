"""A step plug-in given by reference (`tests.integration.plugin_steps:whoami`), for the plug-in tests.

`plugin.whoami` answers the id of the process that ran it, so a test can tell an in-process
run from one in a runtime-instance child process.
"""

from __future__ import annotations

import os
from typing import Any

from runtime_core.steps.api import StepConfig, StepInvocation, step, step_result


class WhoamiConfig(StepConfig):
    label: str


@step("plugin.whoami", config=WhoamiConfig)
async def whoami(config: WhoamiConfig, invocation: StepInvocation) -> dict[str, Any]:
    """Answer the label and the id of the process that ran the step."""
    return step_result({"label": config.label, "pid": os.getpid()})
