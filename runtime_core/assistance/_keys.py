"""Names of execution assistance: assistants, claimers, help-board scopes and their keys.

An assistant is one incarnation of one runtime instance (`<runtime instance id>|<incarnation>`)
and claims as `@<assistant>` (the claim scripts check its lease, `lib/assistant_lease`). A
help board is a ZSET per visibility scope, under the scope's own hash tag:
`<prefix>{assist:shared}:wanted`, `<prefix>{assist:tenant:<id>}:wanted`,
`<prefix>{assist:group:<id>}:wanted`. Must not decide who may see which scope
(`runtime_core.instances` maps its visibility rules onto scopes).
"""

from __future__ import annotations

from runtime_core.hot_state import HotState

CLAIMER_PREFIX = "@"
SHARED_SCOPE = "shared"


def assistant_id(runtime_instance_id: str, incarnation: str) -> str:
    return f"{runtime_instance_id}|{incarnation}"


def assistant_claimer(assistant: str) -> str:
    """What an assistant's workers claim as (never a local run id: those have no '@')."""
    return CLAIMER_PREFIX + assistant


def tenant_scope(tenant_id: str) -> str:
    return f"tenant:{tenant_id}"


def group_scope(tenant_group_id: str) -> str:
    return f"group:{tenant_group_id}"


def board_key(hot_state: HotState, scope: str) -> str:
    return hot_state.tagged(f"assist:{scope}", "wanted")


ASSISTING_INSTANCE_ATTRIBUTE = "assisting.runtime.instance.id"
"""Engine-event attribute naming the runtime instance whose assisting workers emitted the event
(the ledger records that instance as the entry's runtime instance)."""
