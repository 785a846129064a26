"""Execution assistance: idle runtime instances advancing another instance's wide execution.

Owns the help boards (a ZSET per visibility scope of the executions whose ready steps
outnumber their workers), the owning side's engine hook that posts to them (`HelpRequester`),
the assistance leases an assistant's claims are checked against (Lua `assist_join` /
`assist_leave`, one slot: the execution's hash tag), what an execution records about its
assistants, and naming an assistant's engine events. An assistant claims, runs and completes
steps through the same Lua transitions as the owner's workers; the owner's recovery and
fencing stay as they are. Must not decide visibility (`runtime_core.instances` maps its rules
onto board scopes and runs the assisting loop of an instance) nor run steps itself.
"""

from runtime_core.assistance._board import HelpBoard
from runtime_core.assistance._keys import (
    ASSISTING_INSTANCE_ATTRIBUTE,
    SHARED_SCOPE,
    assistant_claimer,
    assistant_id,
    board_key,
    group_scope,
    tenant_scope,
)
from runtime_core.assistance._leases import AssistanceLeases, Seat, SeatOutcome
from runtime_core.assistance._models import (
    ASSISTANCE_FIELD,
    AssistanceSettings,
    AssistantRecord,
    assistant_records,
)
from runtime_core.assistance._observer import AssistingObserver
from runtime_core.assistance._requester import HelpRequester, ScopesOf

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Asking for help
    "HelpBoard",
    "HelpRequester",
    "ScopesOf",
    "SHARED_SCOPE",
    "tenant_scope",
    "group_scope",
    "board_key",
    # Assisting
    "AssistanceLeases",
    "Seat",
    "SeatOutcome",
    "AssistingObserver",
    "assistant_id",
    "assistant_claimer",
    "ASSISTING_INSTANCE_ATTRIBUTE",
    # Settings and records
    "AssistanceSettings",
    "AssistantRecord",
    "assistant_records",
    "ASSISTANCE_FIELD",
]
