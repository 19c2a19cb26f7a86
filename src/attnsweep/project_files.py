"""The project files the package ships: the repository's ``Snakefile``, ``workflow/`` (the
Snakemake workflow: Snakefile, rules, config schema, report captions), ``config/`` (the default
config and the paper-scale sweeps) and ``profiles/``.

They live once, where the workflow catalog puts them, at the repository's top level. A wheel
carries them as the package data of ``attnsweep.project``, which ``pyproject.toml`` maps onto the
repository's root (``package-dir``), so an installed package finds them with
:mod:`importlib.resources`. An editable install or a checkout on ``PYTHONPATH`` has no such
package (setuptools' editable finder does not import a mapped folder without ``__init__.py``):
there the files are those of the source tree this module runs from.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from attnsweep.errors import SetupError


@functools.cache
def root() -> Path:
    """The folder that holds the shipped ``Snakefile``, ``workflow/``, ``config/`` and ``profiles/``."""
    try:
        return Path(str(resources.files("attnsweep.project")))
    except ModuleNotFoundError:  # an editable install or a checkout: the source tree's root
        return Path(__file__).resolve().parents[2]


def path(*parts: str) -> Path:
    """The shipped file or folder ``PARTS`` (``path("workflow", "Snakefile")``); missing, a SetupError
    that says how to reinstall."""
    found = root().joinpath(*parts)
    if not found.exists():
        raise SetupError(f"missing {found}, a file the package ships: reinstall attnsweep "
                         "(pip install --force-reinstall git+URL, or pip install . in a checkout)")
    return found


def snakefile() -> str:
    """The workflow's Snakefile, for ``module attnsweep: snakefile:`` in a project's Snakefile."""
    return str(path("workflow", "Snakefile"))
