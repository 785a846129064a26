"""`settle_started_heap`: what a started process had allocated leaves the collector's reach and
young collections run less often (serve and runtime-instance processes call it once wired)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from runtime_core.hosting import settle_started_heap
from runtime_core.hosting._heap import YOUNG_COLLECTION_THRESHOLD


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_the_started_heap_is_frozen_and_young_collections_are_paced(restored_collector: None) -> None:
    started = [[n] for n in range(100)]  # containers alive "at start"
    older = gc.get_threshold()[1:]
    settle_started_heap()
    assert gc.get_freeze_count() >= len(started)
    assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, *older)
