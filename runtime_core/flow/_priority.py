"""Run priorities: the range, the default and the check of a requested priority.

A priority orders the queued runs of one admission group (tenant + tenant group): higher
first, oldest first among equals. It never changes how the queue's turns are shared between
groups (the fairness rule, `lua/shared_claim_next.lua` and docs/flow-control.md). Must not
touch Redis: the queue scripts apply it.
"""

from __future__ import annotations

from runtime_core.errors import InvalidArgumentError

MIN_PRIORITY = 1
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 5
"""A run submitted without a priority (the queue scripts read a missing one as this)."""


def checked_priority(priority: int | None) -> int | None:
    """`priority` when it is in range (None: the default); InvalidArgumentError otherwise."""
    if priority is None:
        return None
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidArgumentError(
            f"priority must be an integer, not {type(priority).__name__}.",
            hint=f"Give an integer from {MIN_PRIORITY} (lowest) to {MAX_PRIORITY} (highest).",
        )
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise InvalidArgumentError(
            f"priority {priority} is outside {MIN_PRIORITY}-{MAX_PRIORITY}.",
            hint=f"Give an integer from {MIN_PRIORITY} (lowest) to {MAX_PRIORITY} (highest); "
            f"{DEFAULT_PRIORITY} is the default.",
        )
    return priority
