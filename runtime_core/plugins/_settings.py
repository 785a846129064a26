"""StepPluginSettings: which step plug-ins a process loads.

Owns the two switches (discover installed entry points; explicit `module:attr` references)
and reading them from the environment (`MCP_RUNTIME_STEPS`, comma separated;
`MCP_RUNTIME_STEP_ENTRY_POINTS=0` turns discovery off). Must not load anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

STEPS_ENV = "MCP_RUNTIME_STEPS"
ENTRY_POINTS_ENV = "MCP_RUNTIME_STEP_ENTRY_POINTS"


class StepPluginSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    entry_points: bool = True
    references: tuple[str, ...] = ()

    @classmethod
    def from_env(cls) -> StepPluginSettings:
        return cls(
            entry_points=os.environ.get(ENTRY_POINTS_ENV, "1").strip().lower() not in ("0", "false", "no"),
            references=split_references([os.environ.get(STEPS_ENV, "")]),
        )

    def with_references(self, references: Iterable[str]) -> StepPluginSettings:
        """These settings plus `references` (duplicates dropped, first occurrence kept)."""
        merged = dict.fromkeys([*self.references, *split_references(references)])
        return self.model_copy(update={"references": tuple(merged)})


def split_references(values: Iterable[str]) -> tuple[str, ...]:
    """`["a:x,b:y", "c:z"]` -> `("a:x", "b:y", "c:z")`: each value may hold several, comma separated."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())
