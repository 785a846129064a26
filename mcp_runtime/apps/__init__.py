"""The run view inside MCP hosts that support the MCP Apps extension (`io.modelcontextprotocol/ui`).

Owns the extension, the `ui://` run view resources and the link `run.status` carries to
them. Must not read or render runs itself: `mcp_runtime.run_view` does.
"""

from mcp_runtime.apps._run_view_app import (
    RUN_VIEW_TEMPLATE_URI,
    RUN_VIEW_URI_TEMPLATE,
    RunViewApps,
    link_run_view,
    register_run_view_resources,
    run_view_uri,
)

__all__ = [  # noqa: RUF022 - grouped by concern, not alphabetically
    # The extension
    "RunViewApps",
    "register_run_view_resources",
    "link_run_view",
    # Resource addresses
    "RUN_VIEW_TEMPLATE_URI",
    "RUN_VIEW_URI_TEMPLATE",
    "run_view_uri",
]
