"""simuformer's own ``runner.py`` (Karagodin, Ge, Polyanskiy, Rigollet's code for *Normalization in
Attention Dynamics*), run unmodified for paired timings, and its result against ours.

Reference: github.com/nikitus20/simuformer at 1959a8a6c0488d8b51899bd392ec1b08d01e9d0e. The
scripts are read from SOURCE (never copied into this repository): a clone of that repository, or
a folder holding ``runner.py``, ``simuxform.py`` and ``plot_utils.py`` of that commit (checked by
their git blob hashes). They are written to a temporary directory and ``runner.py`` runs there, in
this process, with its own command line and no patch: ``--no_plot`` and ``--disable_tqdm`` are its
own flags. Timing this process from outside times their code.

- ``theirs``: run it and save its ``density_tensor`` (the fraction of pairs with cosine > 0.999,
  over (beta, checkpoint)) and its checkpoint times as ``--out`` (.npz).
- ``compare``: ours (a store of ``attnsweep run normalized_attention ... observables=clustered,``)
  against theirs at their checkpoints (ours at the first output at or past each), within Monte
  Carlo error: the two are independent means over ``batch`` realisations of a per-realisation
  fraction in [0, 1], whose variance is at most p (1 - p), so |ours - theirs| <= 4 sqrt(2 p (1 - p)
  / batch) + 1e-3 with p their average (as ``bench_dynamics.py compare``). Our realisations share
  their draws across beta (theirs are drawn anew for each): our curve over beta moves as one
  sample, so differences of one sign across beta are not independent evidence.

usage: git clone https://github.com/nikitus20/simuformer /tmp/simuformer
       python benchmarks/authors_simuformer.py theirs /tmp/simuformer --out theirs.npz -- --batch 32
       attnsweep run normalized_attention n=64 d=16 heads=8 beta=$B seeds=32 qk=ginibre v=identity \\
           reduction=mean integrator=euler_anchor schemes=pre_ln, dt=0.1 t_max=50 outputs=501 \\
           observables=clustered, threads=2 --quiet --out ours.zarr
       python benchmarks/authors_simuformer.py compare ours.zarr theirs.npz
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

COMMIT = "1959a8a6c0488d8b51899bd392ec1b08d01e9d0e"
#: git rev-parse COMMIT:<file>
BLOBS = {"runner.py": "5c620076bac2026028da3f657cad1c91c17996bd",
         "simuxform.py": "566578d92f43b609395da04d6bf1e4b52d9ff15b",
         "plot_utils.py": "b6962b0fd80e7be32a439aec24fd74470baeb95d"}


def git_blob(data: bytes) -> str:
    """The git blob hash of a file's bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_scripts(source: Path, commit: str) -> dict[str, bytes]:
    """The three files at ``commit`` from a clone, else from the folder ``source``, which must hold
    COMMIT's files."""
    out = {}
    for name, blob in BLOBS.items():
        try:
            data = subprocess.run(["git", "-C", str(source), "show", f"{commit}:{name}"], check=True,
                                  capture_output=True).stdout
        except (OSError, subprocess.CalledProcessError):  # no git there, or not a clone: the file in it
            data = (source / name).read_bytes()
            if git_blob(data) != blob:
                raise SystemExit(f"{source / name} is not {name} of {COMMIT} (git blob {git_blob(data)})") from None
        out[name] = data
    return out


def theirs(args: argparse.Namespace, runner_args: list[str]) -> None:
    scripts = read_scripts(args.source, args.commit)
    out = args.out.resolve()
    with tempfile.TemporaryDirectory() as work:
        for name, data in scripts.items():
            Path(work, name).write_bytes(data)
        os.chdir(work)
        sys.path.insert(0, work)
        sys.argv = ["runner.py", "--no_plot", "--disable_tqdm", "--outdir", "out", *runner_args]
        runpy.run_path("runner.py", run_name="__main__")
        (pickled,) = Path(work, "out").glob("*.pkl")
        with pickled.open("rb") as f:
            result = pickle.load(f)
    np.savez(out, density=result["density_tensor"].numpy(), times=result["times_list"].numpy(),
             betas=result["betas_list"].numpy())


def agreement(ours: np.ndarray, base: np.ndarray, batch: int) -> tuple[bool, float, float]:
    """Whether two means of ``batch`` realisations agree within 4 sqrt(2 p (1 - p) / batch) + 1e-3
    everywhere, the largest difference and the largest z."""
    p = (ours + base) / 2
    scale = np.sqrt(2 * p * (1 - p) / batch)
    diff = np.abs(ours - base)
    z = diff[scale > 0] / scale[scale > 0]
    return bool(np.all(diff <= 4 * scale + 1e-3)), float(diff.max()), float(z.max(initial=0.0))


def compare(args: argparse.Namespace) -> None:
    from attnsweep.stores.io import open_store

    base = np.load(args.theirs)
    clustered = open_store(args.ours)["clustered"].squeeze(drop=True).transpose("seed", "beta", "t")
    t = clustered["t"].values
    at = np.searchsorted(t, base["times"] - 1e-6)  # the first output at or past each checkpoint
    values = clustered.values[:, :, np.minimum(at, len(t) - 1)]
    ok, diff, z = agreement(values.mean(0), base["density"], values.shape[0])
    verdict = "agree" if ok else "DISAGREE"
    print(f"max |ours - theirs| = {diff:.4f}, max z = {z:.2f}: {verdict} within Monte Carlo error")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("theirs", help="run simuformer's runner.py")
    run.add_argument("source", type=Path, help="a clone of simuformer, or a folder with its three files")
    run.add_argument("--commit", default=COMMIT)
    run.add_argument("--out", type=Path, required=True, help="density, times and betas as .npz")
    check = sub.add_parser("compare", help="ours against theirs within Monte Carlo error")
    check.add_argument("ours", type=Path)
    check.add_argument("theirs", type=Path)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    if args.command == "theirs":
        theirs(args, argv[cut + 1:])
    else:
        compare(args)


if __name__ == "__main__":
    main()
