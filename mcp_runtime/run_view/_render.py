"""Rendering of run views: the DAG and timeline SVGs, and the self-contained MCP App HTML.

Owns the Jinja environment of the run view templates (autoescaped: step names, ids and
errors are data), the shared stylesheet, and the page an MCP host renders for a `ui://`
run resource (stylesheet, SVG and the app bridge script inlined: no other request needed).
Must not read any service.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from mcp_runtime.run_view._graph import RunGraph
from mcp_runtime.run_view._status import status_style
from mcp_runtime.run_view._timeline import Timeline

_STATIC = resources.files("mcp_runtime.run_view").joinpath("static")
STYLESHEET = _STATIC.joinpath("run_view.css").read_text(encoding="utf-8")
_APP_BRIDGE = _STATIC.joinpath("app_bridge.js").read_text(encoding="utf-8")


def template_environment(package: str) -> Environment:
    """The Jinja environment of a package's `templates/`: autoescaped (ids, names and errors are
    data), strict about missing values."""
    return Environment(
        loader=PackageLoader(package, "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


_TEMPLATES = template_environment("mcp_runtime.run_view")


def graph_svg(graph: RunGraph) -> Markup | None:
    """The DAG as an inline SVG, or None when it is not drawn (too many steps, or none)."""
    if graph.layout is None:
        return None
    return Markup(_TEMPLATES.get_template("graph.svg.j2").render(graph=graph))


def timeline_svg(timeline: Timeline) -> Markup | None:
    if not timeline.rows:
        return None
    return Markup(_TEMPLATES.get_template("timeline.svg.j2").render(timeline=timeline))


def run_app_html(graph: RunGraph | None) -> str:
    """The MCP App document: one run's view, or (no graph) the template waiting for a run.status result."""
    return _TEMPLATES.get_template("run_app.html.j2").render(
        graph=graph,
        graph_svg=graph_svg(graph) if graph else None,
        run_style=status_style(graph.status) if graph else None,
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        stylesheet=Markup(STYLESHEET),
        bridge=Markup(_APP_BRIDGE),
    )
