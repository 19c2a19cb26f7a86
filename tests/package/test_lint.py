"""Lint and format checks, part of the suite so that CI and the fast tier both run them: ruff on
every Python file (rules and the 120-column limit in ``pyproject.toml``), snakefmt on every
Snakefile and rule file (the top-level Snakefile, workflow/Snakefile, workflow/rules/*.smk), and Snakemake's
own linter on the workflow (it exits 1 on any lint)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import processes

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def check(*cmd: str) -> None:
    done = processes.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"


def test_ruff() -> None:
    check(str(BIN / "ruff"), "check", ".")


def test_snakefmt() -> None:
    check(str(BIN / "snakefmt"), "--check", "Snakefile", "workflow")


@pytest.mark.slow
def test_snakemake_lint(tmp_path: Path) -> None:
    check(sys.executable, "-m", "snakemake", "--lint", "--directory", str(tmp_path),
          "--configfile", str(REPO / "config" / "config.yaml"))
