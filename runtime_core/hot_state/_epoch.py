"""The dataset epoch: one random token per Redis dataset (per key prefix).

Owns `dataset_epoch`, which reads the epoch and creates it when it is absent. A process (a
control plane, a runtime instance incarnation) remembers the epoch it joined; reading another
one later means the dataset it worked in is gone (Redis restarted without persistence, was
flushed or replaced), so hot state it relies on was lost rather than merely changed. Must not
decide what to do about a lost dataset: its owners do.
"""

from __future__ import annotations

from runtime_core.hot_state._client import HotState
from runtime_core.identity import new_claim_token


def epoch_key(hot_state: HotState) -> str:
    return hot_state.key("hotstate", "epoch")


async def dataset_epoch(hot_state: HotState) -> str:
    """The current dataset's epoch, created (first writer wins) when the dataset has none."""
    key = epoch_key(hot_state)
    pipe = hot_state.redis.pipeline(transaction=False)
    pipe.set(key, f"epoch_{new_claim_token()}", nx=True)
    pipe.get(key)
    _created, epoch = await pipe.execute()
    return str(epoch)
