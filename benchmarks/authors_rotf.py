"""The authors' own ``phase-diagrams.py`` (paper 001), run on the CPU or on CUDA, for paired timings.

Reference: github.com/borjanG/2023-transformers-rotf at 538ba839f7fc03d042e03ad7b557c220defc4148.
The script is read from SOURCE (never copied into this repository): a clone of that repository
(``git show COMMIT:phase-diagrams.py``), or, on a machine without git or network, the file itself
or a folder holding it, which must then be that commit's file (its git blob hash, ``BLOB``)::

    git -C CLONE show 538ba839f7fc03d042e03ad7b557c220defc4148:phase-diagrams.py > .authors/phase-diagrams.py

It is patched in memory and run in this process with its own command line, so that timing this
process from outside times their code. The patches, both outside the numerics:

- ``--device cpu`` (default): ``'cuda'`` -> ``'cpu'``, as the script hard-codes its device (every
  buffer ``.to('cuda')``); ``--device cuda`` runs it on its native device, unpatched there;
- the closing ``plot_pickle(...)`` call is dropped: it draws with ``text.usetex`` (a LaTeX
  install) after the simulation, and the figure is not what is measured.

Their ``density_tensor`` (P_delta(beta, checkpoint), 200 checkpoints) is saved as ``--out`` for
``benchmarks/bench_dynamics.py compare``. The script writes its log and pickle into a
temporary directory.

usage: git clone https://github.com/borjanG/2023-transformers-rotf /tmp/rotf
       python benchmarks/authors_rotf.py /tmp/rotf --out theirs.npy -- --dmodel 32 --ntokens 32 \\
           --batch 512 --betamin 0.1 --betamax 9 --betas 8 --maxtime 30 --use_softmax
       python benchmarks/authors_rotf.py .authors/phase-diagrams.py --device cuda --out theirs.npy -- ...
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "538ba839f7fc03d042e03ad7b557c220defc4148"
SCRIPT = "phase-diagrams.py"
BLOB = "6d8efd5c86cfc648df2a509744e17d2c7be42f45"  # git rev-parse COMMIT:phase-diagrams.py
PLOT = "plot_pickle(fname_prefix + '.pkl');"


def git_blob(data: bytes) -> str:
    """The git blob hash of a file's bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_script(source: Path, commit: str = COMMIT) -> str:
    """phase-diagrams.py at ``commit`` from a clone; else ``source`` itself, or ``source``/phase-diagrams.py,
    which must be the file of COMMIT (blob hash BLOB)."""
    if source.is_dir():
        try:
            return subprocess.run(["git", "-C", str(source), "show", f"{commit}:{SCRIPT}"], check=True,
                                  capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError):  # no git there, or not a clone: the file in it
            source = source / SCRIPT
    data = source.read_bytes()
    if git_blob(data) != BLOB:
        raise SystemExit(f"{source} is not {SCRIPT} of {COMMIT} (git blob {git_blob(data)}, expected {BLOB})")
    return data.decode()


def patched_source(source: str, device: str) -> str:
    """The script with the closing plot dropped and, on the CPU, its device (see above)."""
    if source.count(PLOT) != 1 or "'cuda'" not in source:
        raise SystemExit(f"this {SCRIPT} is not the file this harness patches")
    source = source.replace(PLOT, "pass")
    return source.replace("'cuda'", "'cpu'") if device == "cpu" else source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help=f"a clone of 2023-transformers-rotf, or {SCRIPT} (or its folder)")
    parser.add_argument("--commit", default=COMMIT, help="the commit to read from a clone")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", type=Path, required=True, help="P_delta(beta, checkpoint) as .npy")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, script_args = parser.parse_args(argv[:cut]), argv[cut + 1:]  # after --: phase-diagrams.py's own
    source = patched_source(read_script(args.source, args.commit), args.device)
    out = args.out.resolve()
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        sys.argv = [SCRIPT, *script_args]
        stdout = sys.stdout
        try:
            exec(compile(source, SCRIPT, "exec"), {"__name__": "__main__"})
        finally:
            sys.stdout = stdout
        (pickled,) = Path(work).glob("*.pkl")
        with pickled.open("rb") as f:
            result = pickle.load(f)
    import numpy as np

    np.save(out, result["density_tensor"].numpy())


if __name__ == "__main__":
    main()
