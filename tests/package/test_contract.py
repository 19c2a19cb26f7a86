"""Every built-in experiment keeps the contract (:class:`attnsweep.testing.ExperimentContract`),
each on its tiny config (tests/tiny_configs/<experiment>.yaml). A user's experiment runs the
same class (docs: adding an experiment)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.project import tiny

from attnsweep import registry
from attnsweep.plan.config import load_sweep
from attnsweep.plan.experiment_plan import Plan
from attnsweep.testing import ExperimentContract

BUILT_IN = ("causal_clustering", "circle_synchronization", "cluster_emergence", "critical_scaling",
            "mixture_training", "noisy_clustering", "normalized_attention", "sphere_clustering")


class BuiltIn(ExperimentContract):
    """The tiny sweep's stores are those of the session's shared Snakemake run of the same config
    (``tiny_run``, tests/conftest.py), which the end-to-end tests make anyway: the checks read
    what the workflow wrote. The in-process run of each job is the contract's own default, which
    tests/experiments/test_noisy_clustering.py and the documented template experiment
    (tests/package/test_registry.py) run."""

    @pytest.fixture(autouse=True)
    def _shared_run(self, tiny_run: Callable[[str], Path]) -> None:
        self.tiny_run = tiny_run

    def tiny_plan(self) -> Plan:
        return load_sweep(tiny(self.name)).plans[self.name]  # its dtype too, as the shared run's

    def tiny_stores(self, plan: Plan, folder: Path) -> tuple[dict[str, Path], dict[str, Path]]:
        results = self.tiny_run(self.name) / "results" / self.name
        return ({job: results / "runs" / f"{job}.zarr" for job in plan.jobs()},
                {job: results / "theory" / f"{job}.zarr" for job in plan.theory_jobs()})

    @pytest.mark.slow  # the shared tiny run, if no test made it before: a whole Snakemake run
    def test_tiny_sweep_keeps_the_output_contract(self, tmp_path):
        super().test_tiny_sweep_keeps_the_output_contract(tmp_path)


def contract(name: str) -> type[ExperimentContract]:
    return type(f"Test_{name}", (BuiltIn,), {"name": name, "section": tiny(name)["experiments"][name]})


for _name in BUILT_IN:
    globals()[f"Test_{_name}"] = contract(_name)


def test_every_registered_built_in_is_checked():
    assert set(BUILT_IN) == set(registry.names())


@pytest.mark.parametrize("broken", ["default_wildcards", "targets"])
def test_the_contract_fails_a_broken_experiment(broken, monkeypatch):
    """Seen to fail: a wildcard that is no axis, a boundary along no axis."""
    from attnsweep.contract import Target

    experiment = registry.get("sphere_clustering")
    value = ("nope",) if broken == "default_wildcards" else (Target("t_star", crossing="nope"),)
    monkeypatch.setattr(type(experiment), broken, value)
    with pytest.raises(AssertionError):
        contract("sphere_clustering")().test_attributes()
