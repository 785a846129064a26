"""The single-node client's connections pack a command in one hiredis call: the bytes sent are
redis-py's own, and what redis-py refuses it still refuses."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import BlockingConnectionPool, Connection, SSLConnection
from redis.exceptions import DataError

from runtime_core.hot_state._packing import one_call_packing

COMMANDS: list[tuple[Any, ...]] = [
    ("SET", "k", "v"),
    ("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", 2, "{a}:k1", "{a}:k2", 1.5, 0.1, 1e20, -3, "é€"),
    ("ZADD", "z", 1.0000001, "m", 12345678901234567890, "n"),
    ("HSET", "h", "f", b"\x00\xffbytes", "g", ""),
    ("SCRIPT LOAD", "return 1"),
    ("SET", "k", bytearray(b"ba")),
]


def _packed(connection: Connection, args: tuple[Any, ...]) -> bytes:
    return b"".join(bytes(part) for part in connection.pack_command(*args))


@pytest.mark.parametrize("args", COMMANDS)
def test_a_command_packs_to_redis_pys_bytes(args: tuple[Any, ...]) -> None:
    pool = one_call_packing(BlockingConnectionPool.from_url("redis://localhost:1", decode_responses=True))
    ours = pool.make_connection()
    assert isinstance(ours, Connection) and type(ours) is not Connection
    assert _packed(ours, args) == _packed(Connection(decode_responses=True), args)


def test_an_argument_redis_py_refuses_is_still_refused() -> None:
    pool = one_call_packing(BlockingConnectionPool.from_url("redis://localhost:1"))
    with pytest.raises(DataError, match="bool"):
        pool.make_connection().pack_command("SET", "k", True)


def test_a_tls_url_keeps_its_tls_connections() -> None:
    pool = one_call_packing(BlockingConnectionPool.from_url("rediss://localhost:1"))
    assert issubclass(pool.connection_class, SSLConnection)
