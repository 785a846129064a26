"""What the command line reads from the user: JSON-object arguments and pipeline files.

Owns turning a bad value into a usage error (argparse) or a typed error that says what to give
instead; never a raw OSError. Must not run anything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from runtime_core.errors import NotFoundError


def json_object(text: str) -> dict[str, Any]:
    """argparse type: a JSON object (a bad value is a usage error, exit 2, no traceback)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"must be a JSON object like '{{\"key\": 1}}', not {type(value).__name__}"
        )
    return value


async def read_pipeline_file(path: Path) -> str:
    try:
        return await asyncio.to_thread(path.read_text, encoding="utf-8")
    except FileNotFoundError:
        raise NotFoundError(
            f"Pipeline file '{path}' does not exist (looked in {Path.cwd()}).",
            hint="Give the path of a pipeline JSON file, e.g. examples/pipelines/rag-final-test.json "
            "from the repository root.",
        ) from None
    except IsADirectoryError:
        raise NotFoundError(
            f"Pipeline file '{path}' is a directory.", hint="Give the path of one pipeline JSON file."
        ) from None
