"""Execution assistance settings and what an execution records about its assistants.

Owns `AssistanceSettings` (on or off, lease and board timings, how idle instances look for
work) and `AssistantRecord`, one assisting runtime instance incarnation as `assist_join` /
`assist_leave` keep it in the execution's meta field `assistance` (and so in its terminal
snapshot), with `assistant_records` reading that field. Must not touch Redis.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ASSISTANCE_FIELD = "assistance"


class AssistanceSettings(BaseModel):
    """`lease_ms`: how long an assistant's seat (and the lease of each step it claims) lasts
    without renewal; None: three heartbeat intervals of the instance, which keeps it shorter
    than the health window, so an instance found Unsafe has lost its seats already.
    `board_ttl_ms`: how long a request for help stays on the boards unless re-posted (the owner
    re-posts it every half of it while more steps are ready than its workers).
    `poll_interval_ms`: how often an idle instance reads its boards when no run event woke it.
    `skip_ms`: how long an execution an instance could not join is left alone."""

    model_config = ConfigDict(frozen=True)

    enabled: bool = True
    lease_ms: int | None = Field(default=None, ge=100)
    board_ttl_ms: int = Field(default=2_000, ge=50)
    poll_interval_ms: int = Field(default=2_000, ge=10)
    skip_ms: int = Field(default=1_000, ge=0)
    candidates: int = Field(default=8, ge=1)

    def lease_for(self, heartbeat_interval_ms: int) -> int:
        return self.lease_ms or 3 * heartbeat_interval_ms


class AssistantRecord(BaseModel):
    """One runtime instance incarnation that assisted an execution."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    runtime_instance_id: str
    incarnation: str
    workers: int = Field(description="The effective worker count it brought (its last join).")
    joined_at_ms: int
    lease_until_ms: int
    joins: int = 1
    steps_completed: int = Field(0, description="Steps it completed, counted when it left.")
    left_at_ms: int | None = None
    left_reason: str | None = None

    def active(self, now_ms: int) -> bool:
        """Still assisting: it has not left and its lease has not lapsed."""
        return self.left_at_ms is None and self.lease_until_ms >= now_ms


def assistant_records(attributes: Mapping[str, object]) -> list[AssistantRecord]:
    """The assistants an execution's metadata (or terminal snapshot attributes) records, by
    join time; [] when none (or the field is unreadable)."""
    raw = attributes.get(ASSISTANCE_FIELD)
    if not isinstance(raw, str) or not raw:
        return []
    try:
        decoded = json.loads(raw)
        records = [AssistantRecord.model_validate(value) for value in decoded.values()]
    except (ValueError, AttributeError, ValidationError):
        return []
    return sorted(records, key=lambda r: (r.joined_at_ms, r.runtime_instance_id))
