"""RuntimeServices: start, wire and close the runtime's parts."""

from __future__ import annotations

import logging
from types import TracebackType

from runtime_core.bootstrap._settings import RuntimeSettings
from runtime_core.dag import DagEngine, DagStore, ExecutionObserver
from runtime_core.hot_state import EmbeddedRedis, HotState, connect_hot_state
from runtime_core.policy import RetryEngine
from runtime_core.steps import ExecutorRegistry, default_executor_registry

log = logging.getLogger("runtime_core.bootstrap")


class RuntimeServices:
    """`async with RuntimeServices(settings) as services:` gives a ready engine."""

    def __init__(self, settings: RuntimeSettings, *, observer: ExecutionObserver | None = None) -> None:
        self.settings = settings
        self._observer = observer
        self.embedded_redis: EmbeddedRedis | None = None
        self.hot_state: HotState
        self.dag_store: DagStore
        self.executors: ExecutorRegistry
        self.engine: DagEngine

    async def __aenter__(self) -> RuntimeServices:
        redis_url = self.settings.redis_url
        if redis_url is None:
            self.embedded_redis = EmbeddedRedis(self.settings.data_dir / "redis").start()
            redis_url = self.embedded_redis.url
            log.info("redis.embedded_started url=%s", redis_url)
        self.hot_state = connect_hot_state(redis_url, prefix=self.settings.redis_prefix)
        await self.hot_state.ping()
        self.dag_store = DagStore(self.hot_state)
        self.executors = default_executor_registry(self.settings.data_dir)
        self.engine = DagEngine(
            self.dag_store,
            self.executors,
            RetryEngine(),
            settings=self.settings.engine,
            observer=self._observer,
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.hot_state.close()
        if self.embedded_redis is not None:
            self.embedded_redis.stop()
