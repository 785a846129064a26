"""`mcp-runtime wait-ready`: wait, for a bounded time, until running processes say they are ready.

Owns the subcommand's arguments and output; the probes are `runtime_core.health`'s. Exit codes:
0 every target ready, 1 a target was still not ready at the deadline (each one named with why),
2 a target that is not a probe target.
"""

from __future__ import annotations

import argparse
import sys

from runtime_core.health import ProbeTarget, wait_ready

EXIT_NOT_READY = 1


def _target(text: str) -> ProbeTarget:
    try:
        return ProbeTarget.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return value


async def _wait_ready(args: argparse.Namespace) -> int:
    not_ready = await wait_ready(args.targets, args.timeout)
    for target in args.targets:
        if target.text not in not_ready:
            print(f"ready: {target.text}", file=sys.stderr)
    for text, reason in not_ready.items():
        print(f"error [not_ready]: {text} is not ready after {args.timeout:g} s: {reason}", file=sys.stderr)
    return EXIT_NOT_READY if not_ready else 0


def add_wait_ready(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "wait-ready",
        help="wait until running processes are ready (HTTP /readyz or gRPC health), at most --timeout",
        description="Probe each target until it is ready: http://HOST:PORT asks GET /readyz (`serve`, an "
        "HTTP runtime-instance process), grpc://HOST:PORT asks grpc.health.v1.Health/Check (a gRPC "
        "runtime-instance process). Exit 0 when all are ready, 1 when one is not by the deadline.",
    )
    command.add_argument("targets", nargs="+", type=_target, metavar="TARGET", help="http://… or grpc://…")
    command.add_argument(
        "--timeout", type=_positive_seconds, default=60.0, help="seconds to wait at most (default 60)"
    )
    command.set_defaults(handler=_wait_ready)
