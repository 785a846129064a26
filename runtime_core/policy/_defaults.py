"""The default policy registry: every built-in policy this package ships.

Owns only the assembly of the built-ins. Other engines (concurrency, retention) register
their own built-ins into a registry they are given; this module must not import them.
"""

from __future__ import annotations

from runtime_core.policy._registry import PolicyRegistry
from runtime_core.policy._retry_policies import builtin_retry_policies


def default_policy_registry() -> PolicyRegistry:
    """A fresh registry holding the built-in retry policies."""
    return PolicyRegistry(builtin_retry_policies())
