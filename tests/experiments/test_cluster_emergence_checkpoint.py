"""cluster_emergence with a trained ALBERT's heads (value and query_key checkpoint; paper 004,
Section 11.2, Fig. 10) against checkpoints the tests write (tests/helpers/albert_checkpoint.py).

Truths: the closed forms of the written heads (V_h = S Lambda_h S^-1 exactly, the eigenvalues,
the leading eigenvector S e_1 and both readings of <Q_h phi_1, K_h phi_1>), in both weight formats
and both key layouts; Theorem 4.2's hyperplanes for the good triple; one line naming the file and
the key for every malformed checkpoint; the files' SHA-256 in the job identity, computed here.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import albert_checkpoint as ac
from helpers import processes

from attnsweep import cli
from attnsweep.errors import ConfigError
from attnsweep.experiments.cluster_emergence import checkpoint, good_triples
from attnsweep.plan.config import load_sweep
from attnsweep.registry import get

NAME = "cluster_emergence"
REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "config" / "sweeps" / "cluster_emergence_albert.yaml"
EPS = np.finfo(np.float64).eps


def plan(section: dict):
    return load_sweep({"dtype": "float64", "experiments": {NAME: section}}).plans[NAME]


def section(directory: Path, **changes) -> dict:
    """A tiny run of head 1's (Q_h, K_h, V_h): n = 16 tokens in R^4, two realisations."""
    return {"n": [16], "d": [ac.SIZE], "scale": [2.0], "seeds": 2, "value": "checkpoint", "query_key": "checkpoint",
            "checkpoint": str(directory), "head": 1, "t_max": 6.0, "outputs": 7, "snapshot_times": [0.0, 6.0],
            **changes}


# Tiny tensors: a second intra-op thread only adds barriers (and stalls on a busy machine).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------ reading and the closed forms


@pytest.mark.parametrize("fmt, prefix", [("safetensors", "albert."), ("safetensors", ""), ("bin", "albert."),
                                         ("bin", "")])
def test_heads_are_the_closed_forms(tmp_path: Path, fmt: str, prefix: str) -> None:
    """Either weights file, the keys of AlbertForMaskedLM or of an AlbertModel saved alone: V_h is
    M_h bit for bit (dyadic entries, exact products), Q_h^T K_h = diag(r_h) / sqrt(d_h) to two
    roundings of 1/d_h^{1/4} (4 eps); the eigenvalues within EIGEN_TOL, lambda_1 and the gap within
    twice that (|lambda_1| >= 1), the two readings of <Q_h phi_1, K_h phi_1> within FORM_TOL of
    (r_1 + r_2 + r_4) / 6 and its eighth (the tolerances argued in albert_checkpoint), the flags exactly."""
    directory = ac.write(tmp_path / "ckpt", ac.state_dict(prefix), fmt)
    heads = checkpoint.read(directory)
    assert (heads.count, heads.size) == (ac.HEADS, ac.SIZE)
    for h in ac.SPECTRA:
        np.testing.assert_array_equal(heads.value_matrix(h), ac.value_matrix(h))
        q, k = heads.query_key(h)
        np.testing.assert_allclose(q.T @ k, np.diag(ac.KEY_DIAGONALS[h]) / 2, rtol=0, atol=4 * EPS)
    table = good_triples.head_table(heads)
    for h, want in ac.EXPECTED.items():
        got = {var: values[h - 1] for var, values in table.items()}
        values = got["head_eigenvalue_real"] + 1j * got["head_eigenvalue_imag"]
        np.testing.assert_allclose(values, want["eigenvalues"], rtol=0, atol=ac.EIGEN_TOL, err_msg=f"head {h}")
        np.testing.assert_allclose([got["head_lambda_1"], got["head_gap"]], [want["lambda_1"], want["gap"]],
                                   rtol=0, atol=2 * ac.EIGEN_TOL, err_msg=f"head {h}")
        np.testing.assert_allclose([got["head_phi1_score"], got["head_phi1_score_head"]],
                                   [want["score"], want["score_head"]], rtol=0,
                                   atol=ac.FORM_TOL, err_msg=f"head {h}")
        assert (got["head_eigen_condition"], got["head_good_triple"]) == (want["eigen"], want["good"]), h


def test_store_holds_every_head_and_the_dynamics_run_on_the_chosen_one(tmp_path: Path) -> None:
    """A simulate job of head 1: the head variables (heads numbered from 1) as head_table gives
    them for every system; the dynamics' own V and Q^T K are head 1's (lambda_1 = 2 in the
    spectral summary, phi1_score the head-coordinate number 2/3); the run's attrs name the head."""
    directory = ac.write(tmp_path / "ckpt")
    (spec,) = plan(section(directory)).jobs().values()
    run = get(NAME).simulate(spec, torch.device("cpu"), torch.float64, progress=False)
    assert list(run["head"].values) == [1, 2, 3, 4] and list(run["eigen"].values) == [1, 2, 3, 4]
    table = good_triples.head_table(checkpoint.read(directory))
    for var, values in table.items():
        assert run[var].dims[:5] == ("n", "d", "scale", "seed", "head"), var
        np.testing.assert_array_equal(run[var].values, np.broadcast_to(values, run[var].shape), err_msg=var)
    np.testing.assert_allclose(run["eigenvalue_real"].isel(mode=0).values, 2.0, rtol=0, atol=ac.EIGEN_TOL)
    np.testing.assert_allclose(run["phi1_score"].values, ac.EXPECTED[1]["score_head"], rtol=0,
                               atol=ac.FORM_TOL)
    assert (run.attrs["checkpoint_head"], run.attrs["checkpoint"], run.attrs["value_case"]) == (1, str(directory),
                                                                                             "checkpoint")


@pytest.mark.parametrize("head", [1, 2, 3, 4])
def test_theorem_4_2_check_per_head(tmp_path: Path, head: int) -> None:
    """The theory check of Theorem 4.2 on each head's own dynamics (T = 6, e^{-lambda_1 T} ~ 1e-5
    below cluster_radius for head 1): the good triple's phi_1^*(z_i) end on at most three levels,
    every token on the boundary of their range (limit_fraction 1), its hypotheses met; head 3 (a good
    spectrum, <Q phi_1, K phi_1> < 0) meets no hypothesis; heads 2 and 4 (no simple real positive
    lambda_1 above |lambda_2|, multiplicity 0) are outside the theorem: every check is NaN."""
    (spec,) = plan(section(ac.write(tmp_path / "ckpt"), head=head)).jobs().values()
    experiment = get(NAME)
    run = experiment.simulate(spec, torch.device("cpu"), torch.float64, progress=False)
    theory = experiment.part("reduction").theory(run)
    checks = {name: float(theory[name].squeeze()) for name in ("levels", "limit_fraction", "hypotheses", "hull_excess")}
    assert (run["resolved"] == 1).all()
    if head == 1:
        assert checks["levels"] <= 3 and checks["limit_fraction"] == 1 and checks["hypotheses"] == 1, checks
        assert checks["hull_excess"] <= 0, checks  # Eq. 9.3: the range of phi_1^* never grows
    elif head == 3:
        assert (run["multiplicity"] == 1).all() and checks["hypotheses"] == 0, checks
    else:
        assert (run["multiplicity"] == 0).all() and np.isnan(list(checks.values())).all(), checks


def test_shared_layer_or_group0_layer0(tmp_path: Path) -> None:
    """A checkpoint whose depths do not share one layer is refused with checkpoint_layer: shared
    and read with group0_layer0 (the same group 0 layer 0 keys)."""
    settings = {**ac.config(), "num_hidden_groups": 2}
    directory = ac.write(tmp_path / "ckpt", settings=settings)
    with pytest.raises(ConfigError, match=r"checkpoint: .*config\.json: num_hidden_groups 2"):
        plan(section(directory))
    spec = next(iter(plan(section(directory, checkpoint_layer="group0_layer0")).jobs().values()))
    assert spec.options["checkpoint_layer"] == "group0_layer0"


def test_planning_a_checkpoint_run_imports_neither_torch_nor_scipy(tmp_path: Path) -> None:
    """The planner reads a model.safetensors with numpy and safetensors alone (torch and scipy are
    the jobs' and the reduction's): a fresh process plans a run and lists what it imported."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"dtype": "float64", "experiments": {NAME: section(ac.write(tmp_path / "ckpt"))}}))
    code = ("import sys, json; from attnsweep.plan.config import load_sweep, load_yaml; "
            f"load_sweep(load_yaml({str(path)!r})).plans[{NAME!r}].jobs(); "
            "print(json.dumps([m for m in ('torch', 'scipy', 'safetensors') if m in sys.modules]))")
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["safetensors"]


# ------------------------------------------------------------------ refusals before any job


def drop(key: str):
    def change(directory: Path) -> None:
        weights = ac.state_dict()
        del weights[key]
        ac.write(directory, weights)
    return change


def reshape(directory: Path) -> None:
    weights = ac.state_dict()
    weights[f"albert.{ac.LAYER}attention.query.weight"] = weights[f"albert.{ac.LAYER}attention.query.weight"][:, :12]
    ac.write(directory, weights)


def not_finite(directory: Path) -> None:
    weights = ac.state_dict()
    weights[f"albert.{ac.LAYER}attention.key.weight"][3, 3] = np.nan
    ac.write(directory, weights)


def truncate(name: str):
    def change(directory: Path) -> None:
        data = (directory / name).read_bytes()
        (directory / name).write_bytes(data[: len(data) // 2])
    return change


def settings(**changes):
    def change(directory: Path) -> None:
        (directory / "config.json").write_text(json.dumps({**ac.config(), **changes}))
    return change


def as_bin(directory: Path) -> None:
    (directory / "model.safetensors").unlink()
    ac.write(directory, fmt="bin")


def garbage_bin(directory: Path) -> None:
    (directory / "model.safetensors").unlink()
    (directory / "pytorch_model.bin").write_bytes(b"not a pickle, not a zip archive")


VALUE = f"albert.{ac.LAYER}attention.value.weight"
#: case -> (change to a good checkpoint, or a config change; the key named; words of the line)
REFUSED = {
    "no_directory": (lambda d: None, {"checkpoint": "absent"}, "checkpoint", ["absent is not a directory"]),
    "no_config": (lambda d: (d / "config.json").unlink(), {}, "checkpoint", ["config.json: no such file"]),
    "config_not_json": (lambda d: (d / "config.json").write_text("{hidden_size: 16"), {}, "checkpoint",
                        ["config.json is not readable JSON"]),
    "config_a_list": (lambda d: (d / "config.json").write_text("[16, 4]"), {}, "checkpoint",
                      ["config.json holds a JSON list"]),
    "not_albert": (settings(model_type="bert"), {}, "checkpoint", ["config.json: model_type is 'bert'"]),
    "no_hidden_size": (lambda d: (d / "config.json").write_text(json.dumps(
        {k: v for k, v in ac.config().items() if k != "hidden_size"})), {}, "checkpoint",
        ["config.json has no key hidden_size"]),
    "heads_not_a_divisor": (settings(num_attention_heads=3), {}, "checkpoint",
                            ["config.json: hidden_size 16 is not a multiple of num_attention_heads 3"]),
    "groups": (settings(inner_group_num=2), {}, "checkpoint", ["config.json", "inner_group_num 2",
                                                                "checkpoint_layer: group0_layer0"]),
    "no_weights": (lambda d: (d / "model.safetensors").unlink(), {}, "checkpoint",
                   ["holds neither model.safetensors nor pytorch_model.bin"]),
    "truncated_safetensors": (truncate("model.safetensors"), {}, "checkpoint",
                              ["model.safetensors is not a readable safetensors file"]),
    "truncated_bin": (lambda d: (as_bin(d), truncate("pytorch_model.bin")(d)), {}, "checkpoint",
                      ["pytorch_model.bin is not a readable PyTorch file"]),
    "garbage_bin": (garbage_bin, {}, "checkpoint", ["pytorch_model.bin is not a readable PyTorch file"]),
    "missing_key": (drop(VALUE), {}, "checkpoint",
                    ["model.safetensors has no key albert.encoder.albert_layer_groups.0.albert_layers.0.attention."
                     "value.weight"]),
    "wrong_shape": (reshape, {}, "checkpoint", ["model.safetensors", "attention.query.weight has shape (16, 12)"]),
    "not_finite": (not_finite, {}, "checkpoint", ["model.safetensors", "attention.key.weight holds entries"]),
    "head_out_of_range": (lambda d: None, {"head": 5}, "head", ["head 5 is not in 1..4", "config.json"]),
    "no_head": (lambda d: None, {"head": None}, "head", ["value: checkpoint needs head"]),
    "no_checkpoint": (lambda d: None, {"checkpoint": None}, "checkpoint", ["value: checkpoint needs checkpoint"]),
    "d_not_the_head_size": (lambda d: None, {"d": [3]}, "d", ["config.json", "d must be [4]"]),
    "checkpoint_unused": (lambda d: None, {"value": "identity", "query_key": "identity"}, "checkpoint",
                          ["only used with value: checkpoint or query_key: checkpoint"]),
}


def refused_config(tmp_path: Path, case: str) -> tuple[Path, str, list[str]]:
    change, changes, key, words = REFUSED[case]
    directory = ac.write(tmp_path / "ckpt")
    change(directory)
    run = section(directory, **changes)
    if changes.get("checkpoint") == "absent":
        run["checkpoint"] = str(tmp_path / "absent")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"dtype": "float64", "experiments": {NAME: run}}))
    return path, f"experiments.{NAME}.{key}", words


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_malformed_checkpoint_is_one_line_naming_the_file(tmp_path: Path, case: str, capsys) -> None:
    """``attnsweep validate`` (``cli.main``, this process): exit 2, one stderr line naming the key
    and the file (and the key in the file), nothing on stdout, no results written."""
    path, key, words = refused_config(tmp_path, case)
    status = cli.main(["validate", str(path)])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert status == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"attnsweep: config error: {key}: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert not (tmp_path / "results").exists()


def test_malformed_checkpoint_in_a_fresh_process(tmp_path: Path) -> None:
    """The same contract from ``python -m attnsweep.cli validate``: no traceback, one line."""
    path, key, words = refused_config(tmp_path, "truncated_safetensors")
    done = processes.run([sys.executable, "-m", "attnsweep.cli", "validate", str(path)], capture_output=True,
                         text=True, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"attnsweep: config error: {key}: ") and words[0] in lines[0], lines[0]


# ------------------------------------------------------------------ identity


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_checkpoint_sha256_is_in_the_job_identity(tmp_path: Path) -> None:
    """The job's options hold the SHA-256 of config.json and of the weights (computed here); one
    weight changed, or config.json alone, at the same path gives a new store key; a run without a
    checkpoint holds none of the checkpoint options (stores made before they existed stay valid);
    a job whose checkpoint changed after planning refuses to run."""
    directory = ac.write(tmp_path / "ckpt")
    (first,) = plan(section(directory)).jobs().items()
    assert first[1].options["checkpoint_sha256"] == {name: sha256(directory / name)
                                                     for name in ("config.json", "model.safetensors")}
    weights = ac.state_dict()
    weights[VALUE][0, 0] += 0.125
    ac.write(directory, weights)
    (second,) = plan(section(directory)).jobs()
    (directory / "config.json").write_text(json.dumps({**ac.config(), "vocab_size": 31}))
    (third,) = plan(section(directory)).jobs()
    assert len({first[0], second, third}) == 3
    (plain,) = plan({"n": [8], "d": [2], "t_max": 1.0, "snapshot_times": []}).jobs().values()
    assert not {*checkpoint.fingerprint(directory), "checkpoint", "head", "checkpoint_layer",
                "checkpoint_sha256"} & set(plain.options)
    with pytest.raises(checkpoint.CheckpointError, match=r"config\.json, model\.safetensors changed since"):
        get(NAME).simulate(first[1], torch.device("cpu"), torch.float64, progress=False)


# ------------------------------------------------------------------ the shipped config


def test_shipped_config_is_refused_naming_the_checkpoint_until_it_is_set(tmp_path: Path) -> None:
    """config/sweeps/cluster_emergence_albert.yaml as shipped names a directory the user fills:
    where it is absent, one line names experiments.cluster_emergence.checkpoint; pointed at a
    checkpoint of its sizes (heads of d_h = 128, head 5 among them) it validates, with the Fig. 10
    figure among its figures."""
    done = processes.run([sys.executable, "-m", "attnsweep.cli", "validate", str(SHIPPED)], capture_output=True,
                         text=True, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"attnsweep: config error: experiments.{NAME}.checkpoint: checkpoints/"), lines[0]
    config = yaml.safe_load(SHIPPED.read_text())
    run = config["experiments"][NAME]
    run["checkpoint"] = str(ac.write_random(tmp_path / "ckpt", heads=run["head"], size=run["d"][0]))
    sweep = load_sweep(config).plans[NAME]
    assert len(sweep.jobs()) == 1
    assert "value_spectra" in [fig.name for fig in sweep.experiment.figures(sweep.grid, sweep.options)]
