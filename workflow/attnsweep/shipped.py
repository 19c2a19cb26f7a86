"""The files the package ships beside its code, found through :mod:`importlib.resources`: the
Snakemake workflow (``workflow/``: Snakefile, rules, config schema, report captions) and the
project that ``attnsweep init`` writes (``project/``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from attnsweep.errors import SetupError


def path(*parts: str) -> Path:
    """The shipped file or folder ``attnsweep/PARTS``; missing, a SetupError that says how to reinstall."""
    found = Path(resources.files("attnsweep"), *parts)
    if not found.exists():
        raise SetupError(f"missing {found}, a file the package ships: reinstall attnsweep "
                         "(pip install --force-reinstall git+URL, or pip install . in a checkout)")
    return found


def snakefile() -> str:
    """The workflow's Snakefile, for ``module attnsweep: snakefile:`` in a project's Snakefile."""
    return str(path("workflow", "Snakefile"))
