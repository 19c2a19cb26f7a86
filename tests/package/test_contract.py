"""Every built-in experiment keeps the contract (:class:`attnsweep.testing.ExperimentContract`),
each on its tiny config (tests/tiny_configs/<experiment>.yaml). A user's experiment runs the
same class (docs: adding an experiment)."""

from __future__ import annotations

import pytest
from helpers.project import tiny

from attnsweep import registry
from attnsweep.testing import ExperimentContract

BUILT_IN = ("causal_clustering", "circle_synchronization", "cluster_emergence", "critical_scaling",
            "mixture_training", "noisy_clustering", "normalized_attention", "sphere_clustering")


class BuiltIn(ExperimentContract):
    @pytest.mark.slow  # a tiny sweep in process, ~10 s each; the end-to-end tests run them through Snakemake
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
