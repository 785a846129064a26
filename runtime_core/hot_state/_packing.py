"""One-call command packing for the single-node client's connections.

Owns `one_call_packing(pool)`: the pool's connections pack a command with one
`hiredis.pack_command` call, where redis-py's own hiredis packer first encodes every argument in
Python (a generator and an encoder call per argument: the largest part of packing a pipeline of
scripts with a dozen arguments each). The bytes are the same (str as UTF-8, int and float as
their decimal text, bytes as they are); an argument hiredis refuses (a bool, a memoryview, ...)
and a command name with a space in it ("SCRIPT LOAD") go through redis-py's packer, which
raises or splits exactly as before. Must not change what is sent.
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio.connection import (
    BlockingConnectionPool,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)


class _OneCallPacking:
    def pack_command(self, *args: Any) -> list[bytes]:
        name = args[0]
        if isinstance(name, str) and " " not in name:
            try:
                return [hiredis.pack_command(args)]
            except TypeError:
                pass  # redis-py's packer says what is wrong (DataError)
        packed: list[bytes] = super().pack_command(*args)  # type: ignore[misc]
        return packed


_PACKING: dict[type, type] = {
    base: type(f"OneCallPacking{base.__name__}", (_OneCallPacking, base), {})
    for base in (Connection, SSLConnection, UnixDomainSocketConnection)
}


def one_call_packing(pool: BlockingConnectionPool) -> BlockingConnectionPool:
    """`pool`, its connections (none made yet) packing commands in one hiredis call."""
    pool.connection_class = _PACKING.get(pool.connection_class, pool.connection_class)
    return pool
