"""A catalog of named pipelines loaded from JSON files (examples/pipelines by default); a file
holds one pipeline, or several in the seed's `{"pipelines": [...]}` wrapper."""

from __future__ import annotations

from pathlib import Path

from runtime_core.errors import NotFoundError
from runtime_core.pipeline._models import PipelineDefinition, parse_pipelines


class PipelineCatalog:
    def __init__(self, pipelines: dict[str, PipelineDefinition] | None = None) -> None:
        self._pipelines = dict(pipelines or {})

    @classmethod
    def from_directory(cls, directory: Path) -> PipelineCatalog:
        catalog = cls()
        for path in sorted(Path(directory).glob("*.json")):
            for pipeline in parse_pipelines(path.read_text(encoding="utf-8")):
                catalog.add(pipeline)
        return catalog

    def add(self, pipeline: PipelineDefinition) -> None:
        self._pipelines[pipeline.name] = pipeline

    def get(self, name: str) -> PipelineDefinition:
        try:
            return self._pipelines[name]
        except KeyError:
            raise NotFoundError(
                f"No pipeline named '{name}' in the catalog.",
                hint="Known pipelines: " + (", ".join(sorted(self._pipelines)) or "none"),
            ) from None

    def names(self) -> list[str]:
        return sorted(self._pipelines)

    def all(self) -> list[PipelineDefinition]:
        return [self._pipelines[name] for name in self.names()]
