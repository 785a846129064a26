"""Build hook: ship the repository's top-level data folders inside the packages.

Everything else is declared in pyproject.toml. The Lua scripts, the default RBAC model and
policy and the example pipeline catalog stay top-level folders of the repository (the
design's layout); the build maps each to a data package, so a wheel carries them and
`runtime_core.package_data.shipped_folder` finds them once installed.
"""

from setuptools import find_namespace_packages, setup

# data package in the wheel -> repository folder it is built from
DATA_PACKAGES = {
    "runtime_core.hot_state.lua": "lua",
    "mcp_runtime.rbac_policies": "rbac_policies",
    "mcp_runtime.pipelines": "examples/pipelines",
}

setup(
    packages=[*find_namespace_packages(include=["mcp_runtime*", "runtime_core*"]), *DATA_PACKAGES],
    package_dir=DATA_PACKAGES,
)
