"""Operations: side effects of steps that survive uncertainty (a process killed mid-call).

A step that calls a peer which may act (an HTTP tool, an MCP server's tool, a model) makes
the call through `guarded_call`, which records an *operation id* in the execution's hot
state (a Lua transition fenced by the step's claim token) before anything goes out, and
sends it where the peer understands one (`Idempotency-Key` for HTTP, `_meta` for MCP). If
the process dies during the call, the next claim of the step finds the operation
*uncertain* (ledger: `step.operation_uncertain`) and the step's declared
`UncertaintyPolicy` settles it (ledger: `step.operation_settled`, `settled_by`):

- `retry`: call again with the same operation id (an idempotent peer deduplicates);
- `reconcile`: ask the peer's status operation; call again only if it never saw the id;
- `fail`: the step fails with code `uncertain` (never retried unless a policy names it);
- `ask`: the step parks (waiting key `<step>.uncertain`, input `DECISION_INPUT_SCHEMA`)
  until a human answers `retry`, `fail` or `done` (with the result).

Never a silent second call. Use from a step (or an agent loop making many calls, one
operation name per call, e.g. `turn-3`, `tool-7`, with `settle_done=True`)::

    from runtime_core.steps.operations import OutcomeUnknown, UncertaintyPolicy, guarded_call

    async def execute(self, invocation):
        async def call(operation_id: str) -> dict:
            ...  # send operation_id to the peer; raise StepFailure when the peer answered a
            ...  # failure, OutcomeUnknown(StepFailure(...)) when it may have acted unanswered
        return await guarded_call(invocation, "call", UncertaintyPolicy.RETRY, call)

`invocation.operations` is the step's `OperationJournal` (None outside the engine: the call
then goes out under a fresh id, nothing recorded); `begin` / `settle` are there for loops
that need finer control. Owns this vocabulary and the policy sequence. Must not touch Redis
(the DAG engine implements the journal) nor know any peer's protocol.
"""

from runtime_core.policy import UNCERTAIN_FAILURE_CODE
from runtime_core.steps.operations._guard import OutcomeUnknown, guarded_call, uncertain_waiting_key
from runtime_core.steps.operations._models import (
    DECISION_INPUT_SCHEMA,
    OPERATION_PREFIX,
    Decision,
    OperationJournal,
    OperationRecord,
    OperationStart,
    OperationState,
    StartOutcome,
    UncertaintyPolicy,
    new_operation_id,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Making a guarded call
    "guarded_call",
    "OutcomeUnknown",
    "UncertaintyPolicy",
    "UNCERTAIN_FAILURE_CODE",
    # Human decisions (policy ask)
    "DECISION_INPUT_SCHEMA",
    "Decision",
    "uncertain_waiting_key",
    # The journal the engine gives each claimed step
    "OperationJournal",
    "OperationStart",
    "StartOutcome",
    "OperationRecord",
    "OperationState",
    "new_operation_id",
    "OPERATION_PREFIX",
]
