"""`shipped_folder`: a data folder of the checkout when running from one, else of the install."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

# The folder holding `runtime_core/` and `mcp_runtime/`: the repository root in a checkout,
# site-packages in an install (which never holds the repository's pyproject.toml).
SOURCE_ROOT = Path(__file__).resolve().parents[2]


def shipped_folder(source: str, package: str) -> Path:
    """The repository folder `source` in a checkout; in an install, the folder of the data
    package `package` (e.g. `runtime_core.hot_state.lua`) that the build made of it."""
    checkout = SOURCE_ROOT / source
    if (SOURCE_ROOT / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    parent, _, folder = package.rpartition(".")
    # Through the regular parent package: the data package itself has no __init__.py.
    # Installed packages live on the filesystem (zip imports are not supported).
    return Path(str(files(parent) / folder))
