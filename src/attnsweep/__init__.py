"""attnsweep: parameter sweeps of self-attention dynamics as a Snakemake workflow."""

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def _source_version() -> str:
    """The version in the ``pyproject.toml`` of the source tree this package runs from (a
    checkout used through ``PYTHONPATH`` or as a Snakemake module, not installed), or
    ``0+unknown`` where there is none."""
    try:
        project = tomllib.loads(Path(__file__).resolve().parents[2].joinpath("pyproject.toml").read_text())["project"]
    except (OSError, ValueError, KeyError):
        return "0+unknown"
    return project["version"] if project.get("name") == "attnsweep" else "0+unknown"


try:
    __version__ = version("attnsweep")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = _source_version()
