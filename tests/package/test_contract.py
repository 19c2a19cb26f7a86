"""Every built-in experiment (``BUILTIN`` of attnsweep.registry) keeps the contract
(:class:`attnsweep.testing.ExperimentContract`), each on its tiny config
(tests/tiny_configs/<experiment>.yaml). A user's experiment runs the same class in its own
package (docs: adding an experiment); one installed here is not checked here."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import processes
from helpers.project import BUILT_IN, REPO, template_experiment, tiny

from attnsweep import registry
from attnsweep.plan.config import load_sweep
from attnsweep.plan.experiment_plan import Plan
from attnsweep.testing import ExperimentContract


class BuiltIn(ExperimentContract):
    """The tiny sweep's stores are those of the session's shared Snakemake run of the same config
    (``tiny_run``, tests/conftest.py), which the end-to-end tests make anyway: the checks read
    what the workflow wrote. The in-process run of each job is the contract's own default, which
    tests/experiments/test_noisy_clustering.py and the documented template experiment
    (tests/package/test_registry.py) run. The tiny config is read where a check needs the plan: a
    missing one fails those checks alone, naming the file to add."""

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
    return type(f"Test_{name}", (BuiltIn,), {"name": name})


for _name in BUILT_IN:
    globals()[f"Test_{_name}"] = contract(_name)


@pytest.mark.parametrize("broken", ["default_wildcards", "targets"])
def test_the_contract_fails_a_broken_experiment(broken, monkeypatch):
    """Seen to fail: a wildcard that is no axis, a boundary along no axis."""
    from attnsweep.contract import Target

    experiment = registry.get("sphere_clustering")
    value = ("nope",) if broken == "default_wildcards" else (Target("t_star", crossing="nope"),)
    monkeypatch.setattr(type(experiment), broken, value)
    with pytest.raises(AssertionError):
        contract("sphere_clustering")().test_attributes()


def test_the_contract_fails_a_boundary_option_in_a_job_identity(monkeypatch):
    """sphere_clustering's result_options keeps every option but q, k, v: an option it also
    declares a boundary option stays in each job's identity, and the contract says so."""
    experiment = registry.get("sphere_clustering")
    contract("sphere_clustering")().test_defaults_make_a_plan_with_finite_estimates()
    monkeypatch.setattr(type(experiment), "boundary_options", lambda self, options: {"delta": options["delta"]})
    with pytest.raises(AssertionError, match=r"boundary options \['delta'\] in a job's identity"):
        contract("sphere_clustering")().test_defaults_make_a_plan_with_finite_estimates()


#: The test modules that take every experiment, one test each.
EVERY_EXPERIMENT = ("tests/package/test_contract.py", "tests/package/test_registry.py",
                    "tests/experiments/test_experiments_e2e.py", "tests/experiments/test_experiments_grow_e2e.py",
                    "tests/run/test_worker.py")


def test_an_installed_experiment_is_left_to_its_own_tests(tmp_path: Path) -> None:
    """With the template experiment of docs/extending.md installed (its entry point on the path),
    the registry lists it and the repository's tests that take every experiment collect the
    built-ins alone: it has no tiny config here, and its own contract test runs it."""
    site, _ = template_experiment(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site)}
    names = processes.run([sys.executable, "-c", "from attnsweep import registry; print(registry.names())"],
                          env=env, capture_output=True, text=True, check=True).stdout
    assert "toy_attention" in names
    collected = processes.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               *EVERY_EXPERIMENT], cwd=REPO, env=env, capture_output=True, text=True)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    tests = collected.stdout.splitlines()
    assert [line for line in tests if "toy_attention" in line] == []
    for path in EVERY_EXPERIMENT:  # each still takes the built-ins (sphere_clustering among them)
        assert any(line.startswith(path) and "sphere_clustering" in line for line in tests), path
