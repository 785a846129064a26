"""Redis key layout of one runtime instance: every key shares the hash tag `{<instance id>}`.

`register_instance`, `publish_capacity`, `retire_instance`, `reserve_capacity` and
`release_reservation` each touch only these keys, so each call stays in one Cluster slot.
`predecessors` records the superseded incarnations whose work recovery still has to take
over. The instance index SET is global.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.hot_state import HotState


@dataclass(frozen=True)
class InstanceKeys:
    registry: str
    capacity: str
    reservations: str
    predecessors: str

    @classmethod
    def of(cls, hot_state: HotState, runtime_instance_id: str) -> InstanceKeys:
        return cls(
            registry=hot_state.tagged(runtime_instance_id, "registry"),
            capacity=hot_state.tagged(runtime_instance_id, "capacity"),
            reservations=hot_state.tagged(runtime_instance_id, "reservations"),
            predecessors=hot_state.tagged(runtime_instance_id, "predecessors"),
        )


def instance_index_key(hot_state: HotState) -> str:
    return hot_state.key("registry", "instances")
