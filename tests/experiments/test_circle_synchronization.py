"""circle_synchronization as a job: independent of the job cut and the chunking, and bad input
refused in one line naming its key."""

from __future__ import annotations

import numpy as np
import pytest

from attnsweep.errors import ConfigError
from attnsweep.plan.config import load_sweep
from attnsweep.reduce.aggregate import collect
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store

NAME = "circle_synchronization"
SECTION = {"n": [3, 5], "beta": [-2.0, -1.0, 0.0], "seeds": 4, "t_max": 20.0}


def sweep_of(tmp_path, section: dict, top: dict | None = None):
    config = {**(top or {}), "experiments": {NAME: section}}
    plan = load_sweep(config).plans[NAME]
    runs = [run_job(spec, tmp_path / "runs" / f"{path}.zarr", device="cpu", threads=1, progress=False)
            for path, spec in plan.jobs().items()]
    return open_store(collect(runs, tmp_path / "sweep.zarr")).load()


def test_a_job_is_independent_of_the_job_cut_and_the_chunking(tmp_path, monkeypatch) -> None:
    """One job for everything, one per (n, beta, seed), and chunks of one system give the same arrays
    bit for bit: a start's angles are keyed by (n, seed), and each system's products are its own."""
    sweeps = {}
    for name, wildcards in (("single", []), ("fanned", ["n", "beta", "seed"]), ("chunked", ["n"])):
        if name == "chunked":  # every system claims the whole budget: one a chunk
            monkeypatch.setattr("attnsweep.experiments.circle_synchronization.simulate.system_bytes",
                                lambda *a: 1 << 40)
        sweeps[name] = sweep_of(tmp_path / name, {**SECTION, "wildcards": wildcards})
    ref = sweeps["single"]
    assert not np.isnan(ref["residual"].values).any()
    for other in ("fanned", "chunked"):
        for var in ref.data_vars:
            if var != "simulated":
                np.testing.assert_array_equal(sweeps[other][var].values, ref[var].values, err_msg=f"{other}: {var}")


@pytest.mark.parametrize(("patch", "key"), [
    ({"scan": {"start": 0.0, "stop": -1.0, "step": 0.1}}, "scan"),
    ({"beta": [-10.0], "t_max": 1000.0}, "beta"),
    ({"n": [1]}, "n"),
    ({"beta": [11.0]}, "beta"),
    ({"normalisations": ["softmax"]}, "normalisations"),
    ({"courant": 3.0}, "courant"),
    ({"spread": -1}, "spread"),
])
def test_bad_input_is_one_line_naming_the_key(patch: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_sweep({"experiments": {NAME: {**SECTION, **patch}}})
    text = str(err.value)
    assert f"experiments.{NAME}.{key}" in text and "\n" not in text, text
