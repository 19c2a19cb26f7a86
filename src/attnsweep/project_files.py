"""The project files the package ships: the repository's ``Snakefile``, ``workflow/`` (the
Snakemake workflow: Snakefile, rules, config schema, report captions), ``config/`` (the default
config and the paper-scale sweeps) and ``profiles/``.

They live once, where the workflow catalog puts them, at the repository's top level. A wheel
carries them as the package data of ``attnsweep.project``, which ``pyproject.toml`` maps onto the
repository's root (``package-dir``), so an installed package finds them where Python's import
system finds that package. An editable install or a checkout on ``PYTHONPATH`` has no such
package (setuptools' editable finder does not import a mapped folder without ``__init__.py``):
there the files are those of the source tree this module runs from.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from attnsweep.errors import SetupError


@functools.cache
def root() -> Path:
    """The folder that holds the shipped ``Snakefile``, ``workflow/``, ``config/`` and ``profiles/``:
    that of the package ``attnsweep.project`` (a namespace package, data only: its one location)."""
    spec = importlib.util.find_spec("attnsweep.project")
    if spec is None or not spec.submodule_search_locations:  # an editable install or a checkout
        return Path(__file__).resolve().parents[2]
    return Path(next(iter(spec.submodule_search_locations)))


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
