"""The conda environment installs what the package needs: ``envs/attnsweep.yaml`` lists every
runtime dependency of ``pyproject.toml``, under its conda-forge name, with the same floor.

Truth: ``[project] dependencies`` of ``pyproject.toml``, which pip installs. A dependency the conda
file lacks is not an error at ``conda env create``: ``pip install -e .`` quietly fills it from PyPI
afterwards, so the environment drifts from conda-forge without anyone seeing it. This test is where
it shows.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]

#: PyPI name -> conda-forge name, where they differ (the conda file takes the lighter package
#: where conda-forge splits one: snakemake-minimal, dask-core, matplotlib-base).
CONDA_NAME = {
    "snakemake": "snakemake-minimal",
    "dask": "dask-core",
    "matplotlib": "matplotlib-base",
    "torch": "pytorch",
}
#: In the conda file and not a runtime dependency of the package: the interpreter and pip itself.
CONDA_ONLY = {"python", "pip"}


def pypi_floors() -> dict[str, str]:
    """``{conda name: specifier}`` of ``pyproject.toml``'s runtime dependencies."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    floors = {}
    for line in project["dependencies"]:
        requirement = Requirement(line)
        name = requirement.name.lower()
        floors[CONDA_NAME.get(name, name)] = str(requirement.specifier)
    return floors


def conda_floors() -> dict[str, str]:
    """``{name: specifier}`` of ``envs/attnsweep.yaml``'s conda dependencies, less python and pip."""
    environment = yaml.safe_load((REPO / "envs" / "attnsweep.yaml").read_text())
    floors = {}
    for entry in environment["dependencies"]:
        assert isinstance(entry, str), f"envs/attnsweep.yaml: a pip section ({entry!r}) is not expected"
        name, _, specifier = entry.partition(">=")
        name = name.split("=")[0].strip()
        if name not in CONDA_ONLY:
            floors[name] = f">={specifier.strip()}" if specifier else ""
    return floors


def test_conda_env_lists_every_runtime_dependency_with_its_floor():
    pypi, conda = pypi_floors(), conda_floors()
    missing = sorted(set(pypi) - set(conda))
    extra = sorted(set(conda) - set(pypi))
    assert not missing, f"envs/attnsweep.yaml lacks pyproject.toml's runtime dependencies {missing}: add them"
    assert not extra, f"envs/attnsweep.yaml lists {extra}, which pyproject.toml's dependencies do not"
    differ = {name: (pypi[name], conda[name]) for name in pypi if pypi[name] != conda[name]}
    assert not differ, f"floors differ, {{name: (pyproject.toml, envs/attnsweep.yaml)}}: {differ}"
