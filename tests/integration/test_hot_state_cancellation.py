"""A task cancelled while its Redis command is in flight always stops (redis-py #2028).

redis-py can swallow a cancellation that lands at the wrong moment: the command returns
normally and a polling loop would go on forever, so shutdown hangs. GuardedRedis raises
the cancellation again.
"""

from __future__ import annotations

import asyncio

from runtime_core.hot_state import EmbeddedRedis, GuardedRedis, connect_hot_state
from tests.helpers import wait_until

POLLERS = 300
ROUNDS = 5


async def _poll_forever(redis: GuardedRedis, redis_key: str, polls: list[int]) -> None:
    while True:
        await redis.hget(redis_key, "status")
        pipe = redis.pipeline(transaction=False)
        pipe.hget(redis_key, "status")
        await pipe.execute()
        polls[0] += 1


async def test_cancelled_pollers_over_a_small_pool_all_stop(redis_server: EmbeddedRedis) -> None:
    hot_state = connect_hot_state(redis_server.url, prefix="cancel:", max_connections=8)
    polls = [0]

    async def every_poller_polled() -> bool:
        return polls[0] >= POLLERS

    try:
        for _ in range(ROUNDS):
            polls[0] = 0
            tasks = [
                asyncio.create_task(_poll_forever(hot_state.redis, hot_state.key("k", str(i)), polls))
                for i in range(POLLERS)
            ]
            await wait_until(every_poller_polled, timeout=30)
            for task in tasks:
                task.cancel()
            done, pending = await asyncio.wait(tasks, timeout=20)
            assert not pending, f"{len(pending)} of {POLLERS} cancelled pollers kept running"
            assert all(task.cancelled() for task in done)
    finally:
        await hot_state.close()
