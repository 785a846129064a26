"""Flow control: run priorities, per-key concurrency and time-window rate limits.

Owns what a user declares to shape when runs start (a submit's priority, a pipeline's
concurrency key, tenant / pipeline / provider-key rate limits), its validation, and the typed
wrappers of the scripts that enforce it atomically in Redis. The shared queue applies
priorities and per-key admission inside its own scripts; this package never claims or
dispatches runs itself. See docs/flow-control.md.
"""

from runtime_core.flow._priority import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY, checked_priority

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # Priorities
    "DEFAULT_PRIORITY",
    "MIN_PRIORITY",
    "MAX_PRIORITY",
    "checked_priority",
]
