"""Key layout of one execution: every key shares the hash tag `{<execution id>}`.

`claimed` holds step -> server ms of the step's current claim, written by the claim scripts
with every claim and read only for steps in `running` (a finished claim's entry is left for
the next claim to overwrite), so recovery can tell a dead owner's claims from later ones
without knowing the lease they were made with. `fenced` exists only for an ExecutionId that
recovery gave up before its DAG was created: `create_execution` refuses it until it expires.
`assistants` holds assistant -> lease-until ms of the runtime instances assisting the execution
(`runtime_core.assistance`): the claim scripts accept an assistant's claims and completions only
while its lease there is unexpired. `operations` holds, per step, the operations its calls to
peers recorded (`_operations`).
`output` holds the live partial output of streaming steps (`_claimed`); `agents` the
checkpoints (sub-steps) of agent steps (`runtime_core.agents`).
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.hot_state import HotState

# Control statuses under which no new step may be claimed.
BLOCKING_CONTROL_STATUSES = ("Pausing", "Paused", "WaitingForInput", "Cancelling", "Cancelled")
BLOCKING_CONTROL_ARG = ",".join(BLOCKING_CONTROL_STATUSES)
# Control statuses of an execution that was cancelled (its claimed steps drain, nothing new starts).
CANCELLED_CONTROL_STATUSES = frozenset({"Cancelling", "Cancelled"})


@dataclass(frozen=True)
class ExecutionKeys:
    meta: str
    status: str
    pending: str
    children: str
    ready: str
    running: str
    token: str
    claimed: str
    retries: str
    recoveries: str
    result: str
    error: str
    needs: str
    control: str
    human_input: str
    fenced: str
    assistants: str
    operations: str
    output: str
    agents: str

    @classmethod
    def of(cls, hot_state: HotState, execution_id: str) -> ExecutionKeys:
        names = cls.__dataclass_fields__
        return cls(**{name: hot_state.tagged(execution_id, name) for name in names})

    def all(self) -> list[str]:
        return [getattr(self, name) for name in self.__dataclass_fields__]

    def advance_keys(self) -> list[str]:
        """KEYS of advance_steps.lua: the claim keys, `claimed`, what completions touch, then
        `assistants`."""
        return [*self.claim_keys(), self.claimed, self.pending, self.children, self.assistants]

    def claim_keys(self) -> list[str]:
        """KEYS[1..9] of both claim scripts (advance_steps.lua, claim_step.lua)."""
        return [
            self.meta,
            self.status,
            self.ready,
            self.running,
            self.token,
            self.retries,
            self.control,
            self.needs,
            self.result,
        ]
