"""PayloadCache: the resolver's bounded in-process LRU layer.

Owns eviction by entry count and by total payload bytes. Must not fetch anything: it only
remembers values the resolver or the codec already had in hand.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

DEFAULT_CACHE_BYTES = 32 * 1024 * 1024
DEFAULT_CACHE_ENTRIES = 4096


@dataclass(frozen=True)
class _Entry:
    value: Any
    size: int


class PayloadCache:
    """LRU of resolved values keyed by string; `max_bytes=0` disables caching."""

    def __init__(
        self, *, max_bytes: int = DEFAULT_CACHE_BYTES, max_entries: int = DEFAULT_CACHE_ENTRIES
    ) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: str) -> tuple[bool, Any]:
        """(True, value) on a hit, (False, None) on a miss."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        self._entries.move_to_end(key)
        return True, entry.value

    def put(self, key: str, value: Any, size: int) -> None:
        if size > self.max_bytes or self.max_entries <= 0:
            return
        self.discard(key)
        self._entries[key] = _Entry(value, size)
        self._bytes += size
        while self._bytes > self.max_bytes or len(self._entries) > self.max_entries:
            _, oldest = self._entries.popitem(last=False)
            self._bytes -= oldest.size

    def discard(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size
