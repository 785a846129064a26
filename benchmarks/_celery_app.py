"""The Celery peer used by `celery_peer`: no-op tasks on a Redis broker and result backend."""

from __future__ import annotations

import os

from celery import Celery

app = Celery(
    "mcprt_bench",
    broker=os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/1"),
    backend=os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/1"),
)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    worker_prefetch_multiplier=4,
    broker_connection_retry_on_startup=True,
)


@app.task(name="bench.noop")
def noop(step: str, *_upstream: object) -> dict[str, str]:
    return {"step": step}


@app.task(name="bench.join")
def join(results: list[object]) -> int:
    return len(results)
