"""Fixtures shared across test modules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

CONFIGS = Path(__file__).resolve().parent / "slurm_configs"


def tiny(experiment: str) -> dict:
    """The tiny config of an experiment (test_slurm runs the same on SLURM)."""
    return yaml.safe_load((CONFIGS / f"{experiment}.yaml").read_text())


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``tiny_run(experiment)``: the directory of one uninterrupted Snakemake run of the tiny
    config, figures included, made on first use and shared read-only by every test after it."""
    from test_resilience import prepare, run_ok

    done: dict[str, Path] = {}

    def run(experiment: str) -> Path:
        if experiment not in done:
            workdir = prepare(tmp_path_factory.mktemp(experiment), tiny(experiment))
            run_ok(workdir, name="reference")
            done[experiment] = workdir
        return done[experiment]

    return run
