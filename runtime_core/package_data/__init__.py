"""Files that ship with the package: where they are, in a source checkout and in an install.

Owns finding the data folders the code reads (the Lua scripts, the default RBAC model and
policy, the example pipeline catalog). In a source checkout (an editable install, or the
repository on PYTHONPATH) they are the repository's top-level folders (`lua/`,
`rbac_policies/`, `examples/pipelines/`); a wheel (`pip install .`) carries them inside the
packages, where the build put them (`setup.py` maps each folder to a package). Must not read
the files themselves.
"""

from runtime_core.package_data._locate import SOURCE_ROOT, shipped_folder

__all__ = ["SOURCE_ROOT", "shipped_folder"]
