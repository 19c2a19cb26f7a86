"""The repository and its documented recipes, as the tests read them: where the repository and the
tiny configs are, the files a documented recipe holds, and the commands the tests share."""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from pathlib import Path

import yaml

from attnsweep.registry import BUILTIN

#: The repository's root.
REPO = Path(__file__).resolve().parents[2]
#: One tiny config per experiment (seconds of work), which every end-to-end test runs.
CONFIGS = REPO / "tests" / "tiny_configs"
#: The built-in experiments (``BUILTIN`` of attnsweep.registry), sorted: the ones the repository's
#: tests run. An experiment installed from another package keeps its own contract test.
BUILT_IN = sorted(point.name for point in BUILTIN)


def doc_files(document: str, section: str) -> dict[str, str]:
    """The fenced code blocks of ``section`` (its ``## `` heading line) of ``document`` (a path
    relative to the repository root, e.g. ``docs/extending.md``) whose first line is ``# PATH``:
    PATH -> the rest of the block. Tests that follow a documented recipe build their files from
    these, so the recipe cannot drift from what is tested."""
    text = (REPO / document).read_text()
    start = text.index(f"\n{section}\n")
    body = text[start:text.find("\n## ", start + 1)]
    return {m["path"]: m["body"] for m in re.finditer(r"```\w+\n# (?P<path>[\w./-]+)\n(?P<body>.*?)```", body, re.S)}


def template_experiment(root: Path) -> tuple[Path, Path]:
    """The template experiment of docs/extending.md, file for file, installed without pip: its
    package and its entry point (a ``dist-info`` folder, as pip writes one) in ``root/site``, to
    put on PYTHONPATH; its config and its contract test in ``root/work``. Returns (site, work)."""
    files = doc_files("docs/extending.md", "## Adding an experiment")
    site, work = root / "site", root / "work"
    for path, body in files.items():
        if path == "pyproject.toml":
            continue
        target = (work if path.startswith(("config/", "test_")) else site) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    project = tomllib.loads(files["pyproject.toml"])["project"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    points = project["entry-points"]["attnsweep.experiments"]
    (info / "entry_points.txt").write_text("[attnsweep.experiments]\n"
                                           + "".join(f"{name} = {value}\n" for name, value in points.items()))
    return site, work


def tiny(experiment: str) -> dict:
    """The tiny config of an experiment (test_slurm runs the same on SLURM)."""
    path = CONFIGS / f"{experiment}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no tiny config tests/tiny_configs/{experiment}.yaml: add one, a run of seconds "
                                "(docs/extending.md: in this repository, what the tests need)")
    return yaml.safe_load(path.read_text())


def refine_command(workdir: Path, *args: str) -> list[str]:
    """``attnsweep refine`` of the tiny refinement config (copied into ``workdir``), run there."""
    shutil.copy(CONFIGS / "refine.yaml", workdir / "config.yaml")
    snakefile = REPO / "Snakefile"
    return [sys.executable, "-m", "attnsweep.cli", "refine", "config.yaml", "-s", str(snakefile), *args]
