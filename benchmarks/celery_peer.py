"""A peer side by side: the same DAG shapes on Celery (Redis broker + result backend).

Shapes: fan-out/fan-in (our `start -> N branches -> join`; Celery `chain(start, chord(group, join))`)
and linear chains (our N-step chain; Celery `chain` of N tasks), same Redis server, same run.
Celery's worker is a separate process with a thread pool of the same size as our worker count.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from benchmarks._harness import Row
from benchmarks.engine_throughput import engine_run, fan_out
from runtime_core.pipeline import PipelineDefinition, parse_pipeline


def chain_pipeline(length: int) -> PipelineDefinition:
    steps = [{"name": "s00000", "stepKey": "test.noop"}]
    steps += [
        {"name": f"s{i:05d}", "stepKey": "test.noop", "dependsOn": [f"s{i - 1:05d}"]}
        for i in range(1, length)
    ]
    return parse_pipeline({"name": f"chain-{length}", "steps": steps})


@contextmanager
def celery_worker(broker_url: str, concurrency: int) -> Iterator[object]:
    env = {**os.environ, "CELERY_BROKER_URL": broker_url}
    os.environ["CELERY_BROKER_URL"] = broker_url
    from benchmarks._celery_app import app

    app.conf.broker_url = app.conf.result_backend = broker_url
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "benchmarks._celery_app",
            "worker",
            "-P",
            "threads",
            "-c",
            str(concurrency),
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "WARNING",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not app.control.ping(timeout=0.5):
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError("celery worker did not start")
        yield app
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def _celery_fan_out(app: object, width: int) -> float:
    from celery import chain, chord, group

    from benchmarks._celery_app import join, noop

    started = time.perf_counter()
    flow = chain(noop.si("start"), chord(group(noop.si(f"b{i}") for i in range(width)), join.s()))
    assert flow.apply_async().get(timeout=600) == width
    return time.perf_counter() - started


def _celery_chains(app: object, length: int, count: int) -> float:
    from celery import chain

    from benchmarks._celery_app import noop

    started = time.perf_counter()
    results = [
        chain(noop.si("s0"), *(noop.s(f"s{i}") for i in range(1, length))).apply_async() for _ in range(count)
    ]
    for result in results:
        result.get(timeout=600)
    return time.perf_counter() - started


def _peer_row(name: str, variant: str, steps: int, seconds: float) -> Row:
    return Row(name, variant, steps, seconds, steps / seconds, 0.0, 0.0, 0.0, 0.0)


async def run(redis_url: str, *, width: int, chain_length: int, chains: int, workers: int) -> list[Row]:
    broker = redis_url.rsplit("/", 1)[0] + "/1"
    rows: list[Row] = []
    with celery_worker(broker, workers) as app:
        peer_fan = _peer_row(
            "celery", f"fan-out 1x{width + 2}, {workers} threads", width + 2, _celery_fan_out(app, width)
        )
        peer_chain = _peer_row(
            "celery",
            f"chains {chains}x{chain_length}, {workers} threads",
            chains * chain_length,
            _celery_chains(app, chain_length, chains),
        )
    ours_fan = await engine_run(redis_url, fan_out(width), workers)
    ours_chain = await engine_run(redis_url, chain_pipeline(chain_length), workers, executions=chains)
    for ours, peer in ((ours_fan, peer_fan), (ours_chain, peer_chain)):
        ours.benchmark = "engine vs celery"
        ours.ratio, ours.baseline = ours.steps_per_s / peer.steps_per_s, "celery"
        rows += [peer, ours]
    return rows
