"""Tests of grid expansion, config validation and the command line (config.py, grid.py, cli.py).

Independent truths: hand-written expected grids (exact decimal literals), and the user-facing
contract of the CLI checked through a real subprocess: a bad config exits non-zero with one
stderr line naming the offending dotted key and no traceback; a good run writes a store with
every axis as a dimension and the provenance attrs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from helpers import processes

from attnsweep.errors import ConfigError
from attnsweep.grid import expand, expand_seeds, format_value

REPO = Path(__file__).resolve().parents[2]
CS = "experiments.critical_scaling"
SC = "experiments.sphere_clustering"
CE = "experiments.cluster_emergence"
CC = "experiments.causal_clustering"
MT = "experiments.mixture_training"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``attnsweep ARGS`` in a fresh interpreter of the running venv."""
    return processes.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        capture_output=True, text=True, cwd=cwd,
    )


# ------------------------------------------------------------------ grid expansion


@pytest.mark.parametrize(
    "spec, expected",
    [
        ([3, 1, 2], [3.0, 1.0, 2.0]),
        (0.5, [0.5]),
        ({"start": 0, "stop": 1, "num": 5}, [0.0, 0.25, 0.5, 0.75, 1.0]),
        ({"start": 0.0, "stop": 0.9, "num": 10}, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
        ({"start": 0, "stop": 0.3, "step": 0.1}, [0.0, 0.1, 0.2, 0.3]),
        ({"start": 0, "stop": 1, "step": 0.1}, [k / 10 for k in range(11)]),
        ({"start": 0.5, "stop": 2, "step": 0.5}, [0.5, 1.0, 1.5, 2.0]),
        ({"start": 0, "stop": 0.35, "step": 0.1}, [0.0, 0.1, 0.2, 0.3]),  # stop not on the grid
        ({"start": 1, "stop": 1000, "num": 4, "log": True}, [1.0, 10.0, 100.0, 1000.0]),
        ({"start": 0.01, "stop": 1, "num": 3, "log": True}, [0.01, 0.1, 1.0]),
    ],
)
def test_expand_exact_values(spec, expected):
    """Inclusive bounds and no float drift: compared with == against decimal literals."""
    assert expand(spec, "k") == expected


def test_expand_rejects_bad_specs():
    with pytest.raises(ConfigError, match="^k: "):
        expand({"start": 0, "stop": 1, "num": 2, "log": True}, "k")
    with pytest.raises(ConfigError, match="^k: "):
        expand({"start": 2, "stop": 1, "step": 0.5}, "k")
    with pytest.raises(ConfigError, match="^k: "):
        expand("abc", "k")
    with warnings.catch_warnings():  # refused before numpy overflows (it warned, then gave nan)
        warnings.simplefilter("error")
        with pytest.raises(ConfigError, match="^k: start -1e\\+308 to stop 1e\\+308 spans more than a float holds"):
            expand({"start": -1e308, "stop": 1e308, "num": 3}, "k")


@pytest.mark.parametrize(
    "value, text",
    [(0.1 + 0.2, "0.3"), (2.0, "2"), (2, "2"), (0.0, "0"), (1e-5, "1e-05"), (3 * 1e-5, "3e-05"),
     (1.5, "1.5"), (1024, "1024"), (0.7 * 3, "2.1"), (float("inf"), "inf")],
)
def test_format_value_canonical(value, text):
    assert format_value(value) == text


def test_format_value_refuses_bool():
    with pytest.raises(TypeError):
        format_value(True)


def test_seeds_count_or_list():
    assert expand_seeds(3, "s") == [0, 1, 2]
    assert expand_seeds([7, 2, 5], "s") == [2, 5, 7]
    for bad in ([], [1, 1], [-1]):
        with pytest.raises(ConfigError, match="^s: "):
            expand_seeds(bad, "s")


# ------------------------------------------------------------------ malformed configs via the CLI

MALFORMED: dict[str, tuple[str, str]] = {
    # case: (YAML text, dotted key the single stderr line must contain)
    "unknown_experiment": ("experiments: {foo: {}}", "experiments.foo"),
    "unknown_key_in_experiment": ("experiments: {critical_scaling: {foo: 1}}", f"{CS}.foo"),
    "unknown_top_level_key": ("foo: 1\nexperiments: {critical_scaling: {}}", "foo"),
    "wrong_type": ('experiments: {critical_scaling: {n: "abc"}}', f"{CS}.n"),
    "wrong_type_in_range": ("experiments: {critical_scaling: {alpha: {start: a, stop: 1, num: 2}}}",
                            f"{CS}.alpha.start"),
    "missing_experiments": ("dtype: float64", "experiments"),
    "rho_one": ("experiments: {critical_scaling: {rho: 1.0}}", f"{CS}.rho"),
    "rho_negative": ("experiments: {critical_scaling: {rho: -0.1}}", f"{CS}.rho"),
    "n_one": ("experiments: {critical_scaling: {n: 1}}", f"{CS}.n"),
    "n_not_integer": ("experiments: {critical_scaling: {n: [16, 16.5]}}", f"{CS}.n"),
    "d_not_integer": ("experiments: {critical_scaling: {d: {start: 4, stop: 5, num: 3}}}", f"{CS}.d"),
    "empty_grid": ("experiments: {critical_scaling: {gamma: []}}", f"{CS}.gamma"),
    "duplicated_values": ("experiments: {critical_scaling: {gamma: [1, 2, 1.0]}}", f"{CS}.gamma"),
    "negative_seed": ("experiments: {critical_scaling: {seeds: [0, -1]}}", f"{CS}.seeds"),
    "zero_seeds": ("experiments: {critical_scaling: {seeds: 0}}", f"{CS}.seeds"),
    "unknown_dtype": ("dtype: float16\nexperiments: {critical_scaling: {}}", "dtype"),
    "unknown_section_dtype": ("experiments: {critical_scaling: {dtype: half}}", f"{CS}.dtype"),
    "unknown_device": ("device: tpu\nexperiments: {critical_scaling: {}}", "device"),
    "wildcard_unknown_axis": ("experiments: {critical_scaling: {wildcards: [n, beta]}}", f"{CS}.wildcards"),
    "num_zero": ("experiments: {critical_scaling: {gamma: {start: 1, stop: 2, num: 0}}}", f"{CS}.gamma"),
    "stop_below_start": ("experiments: {critical_scaling: {gamma: {start: 2, stop: 1, step: 0.5}}}", f"{CS}.gamma"),
    "log_from_zero": ("experiments: {critical_scaling: {gamma: {start: 0, stop: 2, num: 3, log: true}}}",
                      f"{CS}.gamma"),
    "no_experiments": ("experiments: {}", "experiments"),
    "d_below_two": ("experiments: {critical_scaling: {d: [1, 4]}}", f"{CS}.d"),
    "gamma_negative": ("experiments: {critical_scaling: {gamma: [-0.5, 1]}}", f"{CS}.gamma"),
    "alpha_negative": ("experiments: {critical_scaling: {alpha: -1}}", f"{CS}.alpha"),
    "step_zero": ("experiments: {critical_scaling: {gamma: {start: 0, stop: 1, step: 0}}}", f"{CS}.gamma"),
    "range_key_unknown": ("experiments: {critical_scaling: {rho: {start: 0, stop: 0.5, count: 3}}}",
                          f"{CS}.rho"),
    "string_in_list": ("experiments: {critical_scaling: {rho: [0.1, x]}}", f"{CS}.rho"),
    "seeds_string": ("experiments: {critical_scaling: {seeds: many}}", f"{CS}.seeds"),
    "duplicated_seeds": ("experiments: {critical_scaling: {seeds: [1, 2, 1]}}", f"{CS}.seeds"),
    "duplicated_wildcards": ("experiments: {critical_scaling: {wildcards: [n, n]}}", f"{CS}.wildcards"),
    "probes_zero": ("experiments: {critical_scaling: {probes: 0}}", f"{CS}.probes"),
    "unknown_eta_method": ("experiments: {critical_scaling: {eta_method: dense}}", f"{CS}.eta_method"),
    "unknown_noise": ("experiments: {critical_scaling: {noise: uniform}}", f"{CS}.noise"),
    "block_mib_zero": ("block_mib: 0\nexperiments: {critical_scaling: {}}", "block_mib"),
    "quantile_tokens_too_many": ("experiments: {critical_scaling: {quantile_tokens: 100000}}",
                                 f"{CS}.quantile_tokens"),
    "threads_zero": ("threads: 0\nexperiments: {critical_scaling: {}}", "threads"),
    "warm_worker_not_bool": ("warm_worker: 3\nexperiments: {critical_scaling: {}}", "warm_worker"),
    "results_not_string": ("results: [a, b]\nexperiments: {critical_scaling: {}}", "results"),
    "experiment_not_mapping": ("experiments: {critical_scaling: [n, d]}", CS),
    "job_overflows_memory": ("experiments: {critical_scaling: {n: [2000000], d: [1024], rho: 0.5, gamma: 1}}", CS),
    "job_overflows_memory_batched": (
        "experiments: {critical_scaling: {n: [262144], d: [256], rho: 0.5, gamma: {start: 1, stop: 10, num: 40},"
        " eta_method: hutchinson, probes: 64}}", CS),
    "max_job_mib_too_small": ("max_job_mib: 1\nexperiments: {critical_scaling: {}}", "max_job_mib"),
    # NaN and infinities: JSON-schema bounds let NaN through (every comparison with it is false)
    "nan_gamma": ("experiments: {critical_scaling: {gamma: [.nan]}}", f"{CS}.gamma"),
    "nan_beta": ("experiments: {sphere_clustering: {beta: [.nan]}}", f"{SC}.beta"),
    "nan_lr": ("experiments: {mixture_training: {lr: [.nan]}}", f"{MT}.lr"),
    "nan_option": ("experiments: {sphere_clustering: {dt: .nan}}", f"{SC}.dt"),
    "nan_in_range": ("experiments: {cluster_emergence: {scale: {start: .nan, stop: 1, num: 3}}}", f"{CE}.scale"),
    "nan_top_level": ("max_job_hours: .nan\nexperiments: {critical_scaling: {}}", "max_job_hours"),
    "inf_option": ("experiments: {causal_clustering: {t_max: .inf}}", f"{CC}.t_max"),
    "inf_axis_without_inf": ("experiments: {critical_scaling: {gamma: [1, .inf]}}", f"{CS}.gamma"),
    "integer_as_float": ("experiments: {sphere_clustering: {outputs: 1.0e+300}}", f"{SC}.outputs"),
    # sizes: counted before anything is expanded, refused at once
    "seeds_huge": ("experiments: {critical_scaling: {seeds: 1000000000}}", f"{CS}.seeds"),
    "outputs_huge": ("experiments: {sphere_clustering: {outputs: 1000000000}}", f"{SC}.outputs"),
    "step_tiny": ("experiments: {critical_scaling: {gamma: {start: 0, stop: 10, step: 1.0e-9}}}", f"{CS}.gamma"),
    "num_huge": ("experiments: {cluster_emergence: {scale: {start: 1, stop: 2, num: 1000000000}}}", f"{CE}.scale"),
    "jobs_over_max_jobs": ("max_jobs: 3\nexperiments: {critical_scaling: {}}", f"{CS}.wildcards"),
    "records_huge": ("experiments: {mixture_training: {steps: 1000000000000}}", f"{MT}.steps"),
    "snapshots_over_max_outputs": (
        "max_outputs: 2\nexperiments: {causal_clustering: {outputs: 2, snapshot_times: [0, 1, 2]}}",
        f"{CC}.snapshot_times"),
    "huge_L": ("experiments: {mixture_training: {L: [1000000000]}}", f"{MT}.L"),
    # jobs that would run for years: the key that drives the time is named
    "dt_tiny": ("experiments: {sphere_clustering: {dt: 1.0e-12}}", f"{SC}.dt"),
    "t_max_huge": ("experiments: {cluster_emergence: {t_max: 1.0e+12}}", f"{CE}.t_max"),
    "steps_huge_sparse_records": (
        "experiments: {mixture_training: {steps: 1000000000000, record_every: 100000000000}}", f"{MT}.steps"),
    "probes_huge": ("experiments: {critical_scaling: {eta_method: hutchinson, probes: 1000000000}}", f"{CS}.probes"),
    "max_job_hours_small": ("max_job_hours: 1.0e-6\nexperiments: {causal_clustering: {}}", CC),
    # exact eta at n = 16384 takes its n^3 route only where the 1 GiB squared Gram fits a block: the
    # default 256 MiB leaves the n^2 d^2 route (about 104 h for these 8 gamma), 1024 MiB brings it under 1 h
    "exact_eta_block_too_small": (
        "experiments: {critical_scaling: {n: [16384], d: [1024], rho: [0.5], gamma: [0.5, 1, 2, 4, 8, 16, 32, 64],"
        " seeds: 1}}", "block_mib"),
    # image files, read before any job
    "image_file_missing": ("experiments: {mixture_training: {source: digits, K: [2], image_file: /nonexistent.npz}}",
                           f"{MT}.image_file"),
    "image_file_not_npz": ("experiments: {mixture_training: {source: digits, K: [2], image_file: CONFIG}}",
                           f"{MT}.image_file"),
    "image_file_without_digits": ("experiments: {mixture_training: {image_file: /nonexistent.npz}}",
                                  f"{MT}.image_file"),
    # domains and checks of the other experiments
    "beta_zero": ("experiments: {causal_clustering: {beta: [0]}}", f"{CC}.beta"),
    "unknown_mask": ("experiments: {causal_clustering: {masks: [sideways]}}", f"{CC}.masks"),
    "d_zero": ("experiments: {cluster_emergence: {d: [0]}}", f"{CE}.d"),
    "snapshot_past_t_max": ("experiments: {sphere_clustering: {snapshot_times: [100]}}", f"{SC}.snapshot_times"),
    "dt_over_t_max": ("experiments: {sphere_clustering: {dt: 50}}", f"{SC}.dt"),
    "width_zero": ("experiments: {mixture_training: {m: [0]}}", f"{MT}.m"),
    "direct_at_infinite_width": ("experiments: {mixture_training: {engines: [direct], m: [inf]}}", f"{MT}.engines"),
    "map_step_past_steps": ("experiments: {mixture_training: {map_steps: [999999]}}", f"{MT}.map_steps"),
}


def one_clear_line(status: int, out: str, err: str, key: str) -> None:
    """Exit 2, exactly one stderr line naming the dotted key (or a sub-key: seeds.1, gamma.num),
    no traceback, nothing on stdout."""
    assert status == 2, out
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.search(rf"^attnsweep: config error: {re.escape(key)}[.:]", lines[0]), lines[0]
    assert out == ""


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_config_is_one_clear_line(case, tmp_path, capsys):
    """Each case through ``attnsweep validate`` (``cli.main``, in this process), its sizes counted,
    never expanded: a hang guard, not a timing. Each case takes milliseconds (under 0.1 s on the
    2-core machines with both cores busy); expanding a case of 10^9 values would take minutes and
    GiBs, so 10 s parts the two on any machine however loaded."""
    from attnsweep import cli as command

    text, key = MALFORMED[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text.replace("CONFIG", str(path)) + "\n")
    start = time.perf_counter()
    status = command.main(["validate", str(path)])
    assert time.perf_counter() - start < 10.0
    out, err = capsys.readouterr()
    one_clear_line(status, out, err, key)


def test_malformed_config_in_a_real_process(tmp_path):
    """The same contract from a fresh ``attnsweep`` process, for cases of each kind."""
    cases = ["nan_gamma", "seeds_huge", "dt_tiny", "image_file_missing", "unknown_top_level_key"]
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        for case in cases:
            (tmp_path / f"{case}.yaml").write_text(MALFORMED[case][0] + "\n")
        results = dict(zip(cases, pool.map(lambda c: cli("validate", str(tmp_path / f"{c}.yaml")), cases)))
    for case, result in results.items():
        one_clear_line(result.returncode, result.stdout, result.stderr, MALFORMED[case][1])


def test_unreadable_config_is_one_line(tmp_path):
    """Missing file and broken YAML: one line naming the file."""
    bad = tmp_path / "broken.yaml"
    bad.write_text("experiments: {critical_scaling: {n: [1, 2}\n")
    for path in (tmp_path / "missing.yaml", bad):
        result = cli("validate", str(path))
        assert result.returncode != 0
        assert "Traceback" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and path.name in lines[0], result.stderr
    assert "line 1, column" in lines[0]


# ------------------------------------------------------------------ good configs and the CLI


def test_default_config_validates():
    result = cli("validate", str(REPO / "config" / "config.yaml"))
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout
    assert "critical_scaling" in result.stdout


def test_experiments_lists_axes():
    result = cli("experiments")
    assert result.returncode == 0, result.stderr
    from attnsweep import registry

    for name in registry.names():
        assert f"{name}" in result.stdout, name
    for axis in ("n", "d", "rho", "gamma", "alpha"):
        assert f"axis {axis} " in result.stdout, axis


def test_run_writes_store_with_dims_and_provenance(tmp_path):
    """A one-job run through ``attnsweep run``: one file, opened as the README says without
    attnsweep; every axis and seed a dimension, CF-style long_name/units on every variable, and
    the provenance attrs.
    """
    out = tmp_path / "X.zarr"
    result = cli("run", "critical_scaling", "n=16", "d=4", "rho=0.2,0.5", "gamma=1,3", "seeds=2",
                 "eta_method=hutchinson", "probes=4", "dtype=float64", "--out", str(out), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert out.is_file()
    ds = xr.open_zarr(zarr.storage.ZipStore(out, mode="r"), zarr_format=3, consolidated=False)
    for dim in ("n", "d", "seed", "rho", "gamma", "alpha"):
        assert dim in ds.dims, dim
    assert ds["lambda"].dims == ("n", "d", "seed", "rho", "gamma", "alpha")
    assert ds["rho"].values.tolist() == [0.2, 0.5]
    assert ds["gamma"].values.tolist() == [1.0, 3.0]
    assert ds["alpha"].values.tolist() == [0.0]
    assert ds.sizes["probe"] == 4
    for key in ("git_commit", "torch_version", "numpy_version", "device", "dtype", "wall_time_s",
                "noise_convention", "job"):
        assert key in ds.attrs, key
    assert ds.attrs["dtype"] == "float64"
    job = json.loads(ds.attrs["job"])
    assert job["grid"]["rho"] == [0.2, 0.5] and job["seeds"] == [0, 1]
    for var in ds.data_vars:
        assert ds[var].attrs.get("long_name"), var
        assert "units" in ds[var].attrs, var
        assert np.isfinite(ds[var].values).all(), var


# ------------------------------------------------------------------ plans


def test_plan_cuts_grid_into_jobs():
    """Truth: the product of the fanned-out axes; batched axes keep every value in each job."""
    from attnsweep.plan.config import load_sweep

    section = {"n": [16, 24], "d": [4], "rho": [0.0, 0.5], "gamma": {"start": 1, "stop": 3, "num": 3}, "seeds": 2}
    default = load_sweep({"experiments": {"critical_scaling": section}}).plans["critical_scaling"]
    assert default.wildcards == ("n", "d", "seed")
    jobs = {path.rsplit("/", 1)[0]: spec for path, spec in default.jobs().items()}  # point/KEY
    assert sorted(jobs) == ["n~16/d~4/seed~0", "n~16/d~4/seed~1", "n~24/d~4/seed~0", "n~24/d~4/seed~1"]
    spec = jobs["n~24/d~4/seed~1"]
    assert spec.grid["n"] == [24] and spec.seeds == [1]
    assert spec.grid["rho"] == [0.0, 0.5] and spec.grid["gamma"] == [1.0, 2.0, 3.0]
    assert spec.dtype == "float32" and spec.options["noise"] == "scaled"  # schema defaults filled
    assert spec.options["probes"] is None  # no effect under exact eta: not part of the identity
    assert all(path.endswith(f"/{spec.key()}") for path, spec in default.jobs().items())

    fine = load_sweep({"experiments": {"critical_scaling": {**section, "wildcards": ["seed", "rho", "n"]}}})
    jobs = [path.rsplit("/", 1)[0] for path in fine.plans["critical_scaling"].jobs()]
    assert len(jobs) == 2 * 2 * 2
    assert "n~16/rho~0.5/seed~1" in jobs  # canonical axis order whatever the config's order


def test_section_dtype_overrides_the_global_one():
    """An experiment's own dtype reaches its jobs (and their store names); the others keep the
    global one; cluster_emergence defaults to float64."""
    from attnsweep.plan.config import load_sweep

    config = {"dtype": "float32", "experiments": {"critical_scaling": {"dtype": "float64"}, "cluster_emergence": {},
                                                  "sphere_clustering": {}}}
    plans = load_sweep(config).plans
    dtypes = {name: {spec.dtype for spec in plan.jobs().values()} for name, plan in plans.items()}
    assert dtypes == {"critical_scaling": {"float64"}, "cluster_emergence": {"float64"},
                      "sphere_clustering": {"float32"}}
    assert "dtype" not in plans["critical_scaling"].options
    as_global = load_sweep({"dtype": "float64", "experiments": {"critical_scaling": {}}}).plans["critical_scaling"]
    assert set(as_global.jobs()) == set(plans["critical_scaling"].jobs())


def test_sweep_job_mib_is_the_largest_job_estimate():
    """Truth: the maximum of the experiment's own per-job estimate, rounded up to whole MiB
    (the simulate rule's ``mem_mb``); bigger n makes it bigger."""
    from attnsweep.plan.config import load_sweep

    section = {"n": [16, 4096], "d": [8], "rho": [0.0], "gamma": [1.0], "seeds": 1}
    sweep = load_sweep({"experiments": {"critical_scaling": section}})
    plan = sweep.plans["critical_scaling"]
    estimates = [plan.experiment.job_memory_bytes(spec) for spec in plan.jobs().values()]
    assert len(set(estimates)) == 2
    assert sweep.job_mib == -(-max(estimates) // 2**20)
    assert (sweep.job_mib - 1) * 2**20 < max(estimates) <= sweep.job_mib * 2**20


def test_command_line_empty_list():
    """``key=`` and ``key=[]`` are empty lists; brackets make a one-element list."""
    from attnsweep.cli import config_from_pairs, parse_value

    assert parse_value("") == parse_value("[]") == []
    assert parse_value("[7]") == [7] and parse_value("[1,2.5]") == parse_value("1,2.5") == [1, 2.5]
    assert parse_value("16") == 16 and parse_value("float64") == "float64"
    section = config_from_pairs("sphere_clustering", ["snapshot_times=", "beta=[]"])["experiments"]["sphere_clustering"]
    assert section["snapshot_times"] == [] and section["beta"] == []


def test_job_time_estimate_follows_the_work():
    """The estimate grows with the work it counts: twice the steps and records, or twice the
    seeds, take about twice as long (the fixed set-up aside), and every job of the default config
    is minutes at most."""
    from attnsweep.plan.config import load_sweep, load_yaml

    def slowest(**section) -> float:
        config = {"experiments": {"sphere_clustering": {"n": [32], "d": [8], "seeds": 64, **section}}}
        return max(load_sweep(config).plans["sphere_clustering"].seconds().values())

    base = slowest(t_max=30.0, outputs=61)
    assert 1.8 < slowest(t_max=60.0, outputs=121) / base < 2.05
    assert 1.8 < slowest(seeds=128) / base < 2.05
    assert slowest(dt=0.01) > 3 * base  # ten times the steps; the records stay
    for plan in load_sweep(load_yaml(REPO / "config" / "config.yaml")).plans.values():
        assert 0 < max(plan.seconds().values()) < 600, plan.name


def test_a_reader_that_stops_early_gets_no_traceback():
    """``attnsweep validate CONFIG | head -0``: the pipe's reader is gone before the command
    writes (closed here right after the start; the command's imports take far longer), so its
    first write fails with EPIPE; it exits 1 with nothing on stderr, not a traceback."""
    command = [sys.executable, "-m", "attnsweep.cli", "validate", str(REPO / "config" / "config.yaml")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    # a hang guard only: the command takes about a second; were it ever faster than the close, its
    # output would sit in the pipe's buffer and the test would pass without exercising the handler
    stderr = process.communicate(timeout=300)[1].decode()
    assert process.returncode == 1 and "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_validate_prints_cost_per_experiment(capsys):
    from attnsweep import cli as command
    from attnsweep.plan.config import load_yaml

    assert command.main(["validate", str(REPO / "config" / "config.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    experiments = len(load_yaml(REPO / "config" / "config.yaml")["experiments"])
    assert len(lines) == experiments + 1, lines  # one per experiment, then the verdict
    assert all(re.search(r"core-hours, the largest job [\d.]+ (s|min|h) and \d+ MiB$", line)
               for line in lines[:-1]), lines
