"""The extension point (attnsweep.registry, attnsweep.grid.Axis, attnsweep.plan.config).

One statement of each experiment fact: the config schema's experiment sections are composed
from the experiments, each axis's domain and default from its ``Axis``, the rest from the
experiment's ``options_schema``. Independent truths: every default expands to values inside its
axis's domain; the composed section holds exactly the axes, the shared keys and the options; an
option that shadows an axis is refused; each experiment has a tiny config (the end-to-end tests'),
and planning a run of every experiment imports neither torch nor matplotlib. Installed
experiments: the template of docs/extending.md, installed with pip, runs through the workflow to
its boundary and figure; a broken one is one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import processes
from helpers.figcheck import check_figure
from helpers.project import BUILT_IN, CONFIGS, doc_files
from helpers.workflow_runs import crossing

from attnsweep import registry
from attnsweep.contract import Experiment
from attnsweep.grid import Axis, expand
from attnsweep.plan.config import experiment_defaults, load_sweep, load_yaml, plan_experiment, schema
from attnsweep.stores.io import open_store

EXPERIMENTS = BUILT_IN  # an installed plugin has no tiny config here: its own tests check it
REPO = Path(__file__).resolve().parents[2]


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
    whole = processes.run(run, capture_output=True, text=True, check=True).stdout
    assert yaml.safe_load(whole) == schema()
    one = yaml.safe_load(processes.run([*run, "mixture_training"], capture_output=True, text=True, check=True).stdout)
    assert one["properties"] == schema()["properties"]["experiments"]["properties"]["mixture_training"]["properties"]
    bad = processes.run([*run, "mixture"], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "unknown experiment 'mixture'" in bad.stderr


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_has_a_tiny_config(name: str, tmp_path: Path) -> None:
    """The end-to-end, worker and SLURM tests run each experiment from its tiny config."""
    path = CONFIGS / f"{name}.yaml"
    assert path.exists(), f"add tests/tiny_configs/{name}.yaml for the experiment {name}"
    config = {**load_yaml(path), "results": str(tmp_path / "results")}  # no refinement record of the checkout's
    assert list(load_sweep(config).plans) == [name]


def test_planning_a_run_imports_neither_torch_nor_matplotlib(tmp_path: Path) -> None:
    """Snakemake plans every run (a dry run, `--report`, each SLURM job's own Snakemake) from the
    experiments' grids, cost models and captions; torch and matplotlib are for the jobs. Importing
    them there doubled a dry run of the default config (1.8 to 3.8 s: benchmarks/RESULTS.md).
    scipy may come: mixture_training's stage lengths ("auto") are its closed forms."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert sorted(config["experiments"]) == EXPERIMENTS  # the default config plans every experiment
    cmd = [sys.executable, "-X", "importtime", "-m", "snakemake", "-s", str(REPO / "Snakefile"),
           "--directory", str(tmp_path), "--configfile", str(REPO / "config" / "config.yaml"), "--dry-run"]
    run = processes.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    # -X importtime: "import time: self | cumulative | name", the name indented by its depth
    imported = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "snakemake.cli" in imported  # the parse reads the modules
    assert not {"torch", "matplotlib"} & imported, sorted({"torch", "matplotlib"} & imported)


@pytest.mark.slow
def test_the_documented_template_experiment_runs_as_an_installed_package(tmp_path: Path) -> None:
    """The template of docs/extending.md, file for file: pip installs it (into a directory of its own, not
    this environment), its entry point registers it, and the workflow runs it to its boundary
    and figure. Truths: at beta = 0 attention is uniform, so the sharpness is exactly 1/n; the
    boundary is where the seed mean of sweep.zarr crosses the level, found here by np.interp. The
    page's contract test (attnsweep.testing.ExperimentContract) passes on it."""
    files = doc_files("docs/extending.md", "## Adding an experiment")
    parts = ("__init__", "simulate", "resources", "reduction", "captions", "figures")
    assert {"pyproject.toml", *(f"toy_attention/{part}.py" for part in parts), "config/toy.yaml",
            "test_toy_attention.py"} <= set(files)
    package, work, site = tmp_path / "toy-attention", tmp_path / "work", tmp_path / "site"
    for path, body in files.items():
        target = (work if path.startswith(("config/", "test_")) else package) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    processes.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(package)], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(site)}
    listed = processes.run([sys.executable, "-m", "attnsweep.cli", "experiments"], env=env, capture_output=True,
                            text=True, check=True).stdout
    assert "toy_attention: sharpness of one softmax attention step" in listed
    done = processes.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--cores", "2",
                           "--configfile", "config/toy.yaml"], cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]

    results = work / "results" / "toy_attention"
    sweep = open_store(results / "sweep.zarr").load()
    n = sweep["n"].values
    uniform = sweep["sharpness"].sel(beta=0.0).transpose("n", "seed").values
    np.testing.assert_allclose(uniform, np.broadcast_to(1 / n[:, None], uniform.shape), rtol=1e-6)
    mean = sweep["sharpness"].mean("seed")
    boundary = open_store(results / "boundary.zarr").load()
    for size in n:
        curve = mean.sel(n=size).values
        assert np.all(np.diff(curve) > 0)  # sharper as beta grows
        estimate = boundary["beta_star"].sel(n=size)
        assert float(estimate) == pytest.approx(crossing(sweep["beta"].values, curve, 0.5), rel=1e-6)
        assert boundary["beta_star_low"].sel(n=size) <= estimate <= boundary["beta_star_high"].sel(n=size)
    table = pd.read_csv(results / "boundary.csv")
    np.testing.assert_allclose(table["beta_star"], boundary["beta_star"].values, rtol=1e-5)
    figure = results / "figures" / "sharpness"
    assert not check_figure(figure.with_suffix(".png"), figure.with_suffix(".pdf"), panels=1)
    # the contract test of docs/extending.md, run by the user's pytest against the installed package
    checked = processes.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_toy_attention.py"],
                            cwd=work, env=env, capture_output=True, text=True)
    assert checked.returncode == 0 and "5 passed" in checked.stdout, checked.stdout[-4000:]


@pytest.mark.parametrize(("module", "value", "message"), [
    ("raise ImportError('No module named sklearn_extra')", "broken_experiment:Broken",
     "fails to import: ImportError: No module named sklearn_extra"),
    ("", "broken_experiment", "names no subclass of attnsweep.contract.Experiment"),
    ("from attnsweep.experiments.critical_scaling import CriticalScaling as Broken", "broken_experiment:Broken",
     "names the experiment 'critical_scaling', not 'broken'"),
])
def test_a_broken_installed_experiment_is_one_line(tmp_path: Path, module: str, value: str, message: str) -> None:
    """An entry point whose module fails, that names no Experiment class, or a class of another
    name: one line naming the entry point, before any job, from the CLI and from Snakemake alike."""
    (tmp_path / "broken_experiment.py").write_text(module + "\n")
    info = tmp_path / "broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[attnsweep.experiments]\nbroken = {value}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    (tmp_path / "config.yaml").write_text("experiments:\n  critical_scaling: {}\n")
    for command in ([sys.executable, "-m", "attnsweep.cli", "validate", "config.yaml"],
                    [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--configfile", "config.yaml",
                     "--dry-run", "--cores", "1"]):
        done = processes.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        said = done.stdout + done.stderr  # a dry run's WorkflowError goes to stdout
        assert done.returncode != 0
        assert "Traceback" not in said, said
        line = [ln for ln in said.splitlines() if "attnsweep" in ln and "broken" in ln]
        assert len(line) == 1 and message in line[0], said
        assert f"attnsweep.experiments entry point broken = {value}" in line[0]
