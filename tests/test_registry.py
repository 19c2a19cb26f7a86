"""One statement of each experiment fact (attnsweep.registry, attnsweep.grid.Axis, attnsweep.config).

The config schema's experiment sections are composed from the experiments: each axis's domain
and default from its ``Axis``, the rest from the experiment's ``options_schema``. Independent
truths: every default expands to values inside its axis's domain; the composed section holds
exactly the axes, the shared keys and the options; an option that shadows an axis is refused.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import yaml

from attnsweep import registry
from attnsweep.config import experiment_defaults, plan_experiment, schema
from attnsweep.grid import Axis, expand
from attnsweep.registry import Experiment

EXPERIMENTS = registry.names()


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_axis_defaults_lie_in_their_domains(name: str) -> None:
    for axis in registry.get(name).axes:
        key = f"experiments.{name}.{axis.name}"
        assert axis.default is not None, f"{key} has no default"
        axis.check(key, expand(axis.default, key))  # raises ConfigError naming the key


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_schema_section_is_the_experiments_axes_and_options(name: str) -> None:
    experiment = registry.get(name)
    section = schema()["properties"]["experiments"]["properties"][name]
    shared = ["seeds", "wildcards", *(["refine"] if experiment.targets else []), "dtype"]
    assert list(section["properties"]) == [*experiment.axis_names, *shared, *experiment.options_schema["options"]]
    for axis in experiment.axes:
        prop = section["properties"][axis.name]
        assert prop["default"] == axis.default
        assert axis.domain() in prop["description"]  # the documented domain is the checked one
    defaults = experiment_defaults(name)
    assert {k: defaults[k] for k in experiment.axis_names} == {a.name: a.default for a in experiment.axes}
    plan_experiment(name, defaults, "float32")  # the defaults alone make a valid plan


def test_the_schema_documents_the_domain_the_code_checks() -> None:
    """critical_scaling's d: the hand-written schema once said 'integer >= 1' where the code refused d < 2."""
    section = schema()["properties"]["experiments"]["properties"]["critical_scaling"]
    assert "[2, inf]" in section["properties"]["d"]["description"]


class _Shadowing:
    """The class attributes config_schema reads, with an option named like the axis."""

    name = "shadowing"
    targets = ()
    axes = (Axis("n", "int", "tokens", low=2, default=[4]),)
    options_schema: dict[str, Any] = {"description": "x", "seeds": {"default": 1},
                                      "options": {"n": {"type": "integer"}}}


def test_an_option_named_like_an_axis_is_refused() -> None:
    with pytest.raises(TypeError, match=r"shadowing.*\['n'\]"):
        Experiment.config_schema(_Shadowing)


def test_schema_command_prints_the_composed_schema() -> None:
    run = [sys.executable, "-m", "attnsweep.cli", "schema"]
    whole = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert yaml.safe_load(whole) == schema()
    one = yaml.safe_load(subprocess.run([*run, "mixture_training"], capture_output=True, text=True, check=True).stdout)
    assert one["properties"] == schema()["properties"]["experiments"]["properties"]["mixture_training"]["properties"]
    bad = subprocess.run([*run, "mixture"], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "unknown experiment 'mixture'" in bad.stderr
