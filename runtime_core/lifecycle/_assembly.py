"""Lifecycle: the parts that decide what happens to finished runs, wired from their stores.

Owns `Lifecycle` (archiver, sweeper, durable purge, run catalog, schedule) and
`build_lifecycle`, which wires them over the control plane's stores. Without a durable
store nothing can be archived, so only the catalog (hot runs) is built. Must not start
anything by itself: the control plane starts and stops the loops.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.audit import SnapshotWriter
from runtime_core.dag import DagStore
from runtime_core.instances import RunExecutionIndex
from runtime_core.lifecycle._archiver import ArchiverParts, RunArchiver
from runtime_core.lifecycle._catalog import RunCatalog
from runtime_core.lifecycle._purge import DurablePurge
from runtime_core.lifecycle._schedule import LifecycleSchedule
from runtime_core.lifecycle._settings import LifecycleSettings
from runtime_core.lifecycle._sweeper import HotStateSweeper
from runtime_core.queueing import ScaleOutRequestStore, SharedQueue, SharedRunStore
from runtime_core.storage import DurableStore


@dataclass
class Lifecycle:
    catalog: RunCatalog
    schedule: LifecycleSchedule
    archiver: RunArchiver | None = None
    sweeper: HotStateSweeper | None = None
    purge: DurablePurge | None = None

    def start(self) -> None:
        if self.sweeper is not None:
            self.sweeper.start()
        if self.purge is not None:
            self.purge.start()

    def loops_alive(self) -> dict[str, bool]:
        """Each lifecycle loop this configuration runs (readiness): alive or not."""
        loops = {"lifecycle_sweeper": self.sweeper, "lifecycle_purge": self.purge}
        return {name: loop.alive for name, loop in loops.items() if loop is not None and loop.expected}

    async def stop(self) -> None:
        if self.sweeper is not None:
            await self.sweeper.stop()
        if self.purge is not None:
            await self.purge.stop()


@dataclass(frozen=True)
class LifecycleStores:
    runs: SharedRunStore
    queue: SharedQueue
    index: RunExecutionIndex
    dag_store: DagStore
    scale_out: ScaleOutRequestStore


def build_lifecycle(
    stores: LifecycleStores,
    settings: LifecycleSettings,
    *,
    durable: DurableStore | None = None,
    snapshots: SnapshotWriter | None = None,
) -> Lifecycle:
    """The full lifecycle with a durable store and the snapshot writer; the catalog alone without."""
    schedule = LifecycleSchedule(stores.dag_store.hot_state)
    catalog = RunCatalog(stores.runs, stores.index, durable, stores.dag_store)
    if durable is None or snapshots is None:
        return Lifecycle(catalog=catalog, schedule=schedule)
    archiver = RunArchiver(
        ArchiverParts(
            hot_state=stores.dag_store.hot_state,
            runs=stores.runs,
            queue=stores.queue,
            index=stores.index,
            dag_store=stores.dag_store,
            scale_out=stores.scale_out,
            store=durable,
            snapshots=snapshots,
        ),
        settings.hot,
    )
    return Lifecycle(
        catalog=catalog,
        schedule=schedule,
        archiver=archiver,
        sweeper=HotStateSweeper(archiver, schedule, stores.index, settings.hot),
        purge=DurablePurge(durable, settings.durable),
    )
