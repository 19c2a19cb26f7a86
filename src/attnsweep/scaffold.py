"""``attnsweep init``: a new project directory with a copy of the project files the package ships
(:mod:`attnsweep.project_files`): the ``Snakefile``, which uses the installed workflow as a
Snakemake module, the default config, the paper-scale sweeps and the profiles."""

from __future__ import annotations

import shutil
from pathlib import Path

from attnsweep import project_files
from attnsweep.errors import SetupError

FIXED = ("Snakefile", "config/config.yaml", "profiles/default/config.yaml", "profiles/slurm/config.yaml")


def files() -> list[str]:
    """The project's files, relative to its directory: the fixed ones and every shipped sweep."""
    sweeps = sorted(project_files.path("config", "sweeps").glob("*.yaml"))
    return [*FIXED, *(f"config/sweeps/{sweep.name}" for sweep in sweeps)]


def init(directory: str | Path, force: bool = False) -> list[Path]:
    """Write the project's files into ``directory`` (made if missing) and return their paths. Where
    any of them exists already, a SetupError and nothing written, unless ``force``."""
    names = files()
    targets = [Path(directory, name) for name in names]
    existing = [str(target) for target in targets if target.exists()]
    if existing and not force:
        raise SetupError(f"init would overwrite {', '.join(existing)} (--force overwrites)")
    for name, target in zip(names, targets):
        source = project_files.path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (target.exists() and target.samefile(source)):  # init of the checkout itself
            shutil.copyfile(source, target)
    return targets
