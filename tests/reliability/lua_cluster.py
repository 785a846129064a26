"""Redis Cluster key-slot rules and a static reader of the `redis.call` sites of a Lua script.

`key_slot` implements the Redis Cluster spec (CRC16-XMODEM of the key, or of its hash tag:
the text between the first `{` and the next `}` when that text is not empty, mod 16384).
`redis_calls` lists every `redis.call` / `redis.pcall` of a script with its arguments as
source text, so a test can check that each key argument is one of the script's KEYS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLUSTER_SLOTS = 16384

# Where a command's keys are: none, every argument, or only the first one.
KEYLESS_COMMANDS = frozenset({"TIME", "PUBLISH"})  # PUBLISH names a channel, not a key
ALL_ARGS_ARE_KEYS = frozenset({"DEL", "EXISTS", "UNLINK", "TOUCH", "MGET"})
FIRST_ARG_IS_KEY = frozenset(
    {
        "GET",
        "SET",
        "INCR",
        "INCRBY",
        "EXPIRE",
        "PEXPIRE",
        "PERSIST",
        "PTTL",
        "TTL",
        "HGET",
        "HSET",
        "HDEL",
        "HMGET",
        "HGETALL",
        "HVALS",
        "HKEYS",
        "HLEN",
        "HEXISTS",
        "HINCRBY",
        "SADD",
        "SREM",
        "SMEMBERS",
        "SISMEMBER",
        "ZADD",
        "ZREM",
        "ZCARD",
        "ZCOUNT",
        "ZSCORE",
        "ZRANGE",
        "ZRANGEBYSCORE",
        "ZRANGEBYLEX",
        "ZREMRANGEBYSCORE",
        "ZREMRANGEBYLEX",
        "ZLEXCOUNT",
        "ZPOPMIN",
        "LPUSH",
        "RPUSH",
        "LRANGE",
        "XADD",
    }
)


def crc16_xmodem(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def hash_tag(key: str) -> str:
    start = key.find("{")
    if start == -1:
        return key
    end = key.find("}", start + 1)
    if end == -1 or end == start + 1:
        return key
    return key[start + 1 : end]


def key_slot(key: str) -> int:
    return crc16_xmodem(hash_tag(key).encode("utf-8")) % CLUSTER_SLOTS


@dataclass(frozen=True)
class RedisCall:
    line: int
    command: str | None  # None when the command name is not a string literal
    args: list[str]


def _strip_comments(source: str) -> str:
    """Blank out `--` comments (keeping line numbers), leaving string literals intact."""
    out, i, quote = [], 0, ""
    while i < len(source):
        ch = source[i]
        if quote:
            out.append(ch)
            if ch == "\\":
                out.append(source[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif source.startswith("--", i):
            end = source.find("\n", i)
            i = len(source) if end == -1 else end
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _split_args(source: str, start: int) -> tuple[list[str], int]:
    """Top-level comma-separated arguments from `start` (just after `(`) to the matching `)`."""
    args, depth, quote, current = [], 0, "", []
    i = start
    while i < len(source):
        ch = source[i]
        if quote:
            current.append(ch)
            if ch == "\\":
                current.append(source[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch in "([{":
            depth += 1
            current.append(ch)
        elif ch in ")]}" and depth:
            depth -= 1
            current.append(ch)
        elif ch == ")":
            args.append("".join(current).strip())
            return [a for a in args if a], i
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    raise ValueError("unbalanced parentheses in redis.call")


def redis_calls(source: str) -> list[RedisCall]:
    code = _strip_comments(source)
    calls = []
    for match in re.finditer(r"redis\.p?call\s*\(", code):
        args, _end = _split_args(code, match.end())
        literal = re.fullmatch(r"""(['"])([A-Za-z]+)\1""", args[0]) if args else None
        command = literal.group(2).upper() if literal else None
        calls.append(RedisCall(code.count("\n", 0, match.start()) + 1, command, args[1:]))
    return calls


def key_loop_variables(source: str) -> tuple[set[str], set[str]]:
    """(index variables of `for i = n, #KEYS`, value variables of `for _, key in ipairs(KEYS)`)."""
    code = _strip_comments(source)
    indexes = set(re.findall(r"for\s+(\w+)\s*=\s*\d+\s*,\s*#KEYS\s+do", code))
    values = set(re.findall(r"for\s+\w+\s*,\s*(\w+)\s+in\s+ipairs\(\s*KEYS\s*\)\s+do", code))
    return indexes, values


def key_position_names(source: str) -> set[str]:
    """Names bound to a KEYS position by `local NAME = 3` or `local A, B = 2, 4` (upper case):
    the way a script tells an included library where its keys are."""
    code = _strip_comments(source)
    names: set[str] = set()
    pattern = r"local\s+([A-Z_][A-Z0-9_]*(?:\s*,\s*[A-Z_][A-Z0-9_]*)*)\s*=\s*(\d+(?:\s*,\s*\d+)*)\s*$"
    for bound, positions in re.findall(pattern, code, re.MULTILINE):
        bound_names = [name.strip() for name in bound.split(",")]
        if len(bound_names) == len(positions.split(",")):
            names.update(bound_names)
    return names


def key_arguments(call: RedisCall) -> list[str]:
    """The arguments of `call` that Redis treats as key names."""
    if call.command in KEYLESS_COMMANDS:
        return []
    if call.command in ALL_ARGS_ARE_KEYS:
        return call.args
    return call.args[:1]


def is_declared_key(
    argument: str, index_vars: set[str], value_vars: set[str], position_names: frozenset[str] = frozenset()
) -> bool:
    """`KEYS[3]`, `KEYS[NAME]` for a name bound to a position (`key_position_names`), `KEYS[i]`
    for a loop over #KEYS, or the value variable of `ipairs(KEYS)`."""
    indexed = re.fullmatch(r"KEYS\[\s*(\w+)\s*\]", argument)
    if indexed:
        position = indexed.group(1)
        return position.isdigit() or position in index_vars or position in position_names
    return argument in value_vars
