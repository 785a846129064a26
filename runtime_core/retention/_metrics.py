"""What retention, the codec and the resolver report, as a protocol the metrics layer implements.

Owns the `RetentionMetrics` protocol and its no-op default so this package never imports the
metrics backend. Must not count anything itself.
"""

from __future__ import annotations

from typing import Protocol


class RetentionMetrics(Protocol):
    def resolver_hit(self, layer: str) -> None: ...

    def resolver_failure(self, reason: str) -> None: ...

    def resolver_latency(self, seconds: float) -> None: ...

    def payload_externalized(self, size: int) -> None: ...

    def retention_pass(self, strategy: str, trigger: str, seconds: float) -> None: ...

    def retention_action(self, action: str, count: int) -> None: ...


class NullRetentionMetrics:
    def resolver_hit(self, layer: str) -> None:
        return None

    def resolver_failure(self, reason: str) -> None:
        return None

    def resolver_latency(self, seconds: float) -> None:
        return None

    def payload_externalized(self, size: int) -> None:
        return None

    def retention_pass(self, strategy: str, trigger: str, seconds: float) -> None:
        return None

    def retention_action(self, action: str, count: int) -> None:
        return None
