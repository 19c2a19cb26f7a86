"""The repository and its documented recipes, as the tests read them: where the repository and the
tiny configs are, the files a documented recipe holds, and the commands the tests share."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import yaml

#: The repository's root.
REPO = Path(__file__).resolve().parents[2]
#: One tiny config per experiment (seconds of work), which every end-to-end test runs.
CONFIGS = REPO / "tests" / "tiny_configs"


def doc_files(document: str, section: str) -> dict[str, str]:
    """The fenced code blocks of ``section`` (its ``## `` heading line) of ``document`` (a path
    relative to the repository root, e.g. ``docs/extending.md``) whose first line is ``# PATH``:
    PATH -> the rest of the block. Tests that follow a documented recipe build their files from
    these, so the recipe cannot drift from what is tested."""
    text = (REPO / document).read_text()
    start = text.index(f"\n{section}\n")
    body = text[start:text.find("\n## ", start + 1)]
    return {m["path"]: m["body"] for m in re.finditer(r"```\w+\n# (?P<path>[\w./-]+)\n(?P<body>.*?)```", body, re.S)}


def tiny(experiment: str) -> dict:
    """The tiny config of an experiment (test_slurm runs the same on SLURM)."""
    return yaml.safe_load((CONFIGS / f"{experiment}.yaml").read_text())


def refine_command(workdir: Path, *args: str) -> list[str]:
    """``attnsweep refine`` of the tiny refinement config (copied into ``workdir``), run there."""
    shutil.copy(CONFIGS / "refine.yaml", workdir / "config.yaml")
    snakefile = REPO / "Snakefile"
    return [sys.executable, "-m", "attnsweep.cli", "refine", "config.yaml", "-s", str(snakefile), *args]
