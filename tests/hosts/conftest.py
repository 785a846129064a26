"""Fixtures of the data-centre suite: one data centre per module, healthy again before each test.

`datacentre` builds it once (skipped, with the reason, when this machine cannot create network
namespaces: never silently passed) and always tears it down; `dc` hands it to a test only once
every partition is healed, links are fast again and every host's process runs and is ready
(restarting what a previous scenario killed or fenced), whatever that scenario left.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.hosts.datacentre import DataCentre
from tests.hosts.network import namespace_support, sweep_leftovers


@pytest.fixture(scope="module")
def datacentre(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataCentre]:
    reason = namespace_support()
    if reason is not None:
        pytest.skip(f"the data-centre suite needs Linux network namespaces: {reason}")
    swept = sweep_leftovers()
    if swept:
        print(f"\nremoved the namespaces of a crashed earlier session: {swept}")
    dc = DataCentre(tmp_path_factory.mktemp("datacentre"))
    try:
        dc.build()
        dc.start_all()
        dc.run(dc.open_observers())
        yield dc
    finally:
        try:
            if dc.client is not None:
                dc.run(dc.close_observers())
        finally:
            dc.destroy()


@pytest.fixture
async def dc(datacentre: DataCentre) -> AsyncIterator[DataCentre]:
    await asyncio.to_thread(datacentre.restore)
    await datacentre.on_client(datacentre.wait_all_ready())
    yield datacentre
