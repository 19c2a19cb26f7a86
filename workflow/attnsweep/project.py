"""``attnsweep init``: a new project directory, a copy of the project the package ships: a
Snakefile that uses the installed workflow as a Snakemake module, the default config and the
profiles (the files of a checkout's root, which links them)."""

from __future__ import annotations

import shutil
from pathlib import Path

from attnsweep import shipped
from attnsweep.errors import SetupError

FILES = ("Snakefile", "config/config.yaml", "profiles/default/config.yaml", "profiles/slurm/config.yaml")


def init(directory: str | Path, force: bool = False) -> list[Path]:
    """Write the project's files into ``directory`` (made if missing) and return their paths. Where
    any of them exists already, a SetupError and nothing written, unless ``force``."""
    targets = [Path(directory, name) for name in FILES]
    sources = [shipped.path("project", name) for name in FILES]
    existing = [str(target) for target in targets if target.exists()]
    if existing and not force:
        raise SetupError(f"init would overwrite {', '.join(existing)} (--force overwrites)")
    for source, target in zip(sources, targets):
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (target.exists() and target.samefile(source)):  # a checkout's root links to the sources
            shutil.copyfile(source, target)
    return targets
