"""Redis key of the per-item recovery claims of one runtime instance.

It shares the instance's hash tag `{<runtime instance id>}` with the registry, capacity and
reservation keys, so `claim_recovery_item`, `complete_recovery_item` and
`mark_instance_recovered` each touch a single Cluster slot.
"""

from __future__ import annotations

from runtime_core.hot_state import HotState


def recovery_claims_key(hot_state: HotState, runtime_instance_id: str) -> str:
    return hot_state.tagged(runtime_instance_id, "recovery")
