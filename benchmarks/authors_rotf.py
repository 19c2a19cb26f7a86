"""The authors' own ``phase-diagrams.py`` (paper 001), run on the CPU, for paired timings.

Reference: github.com/borjanG/2023-transformers-rotf at 538ba839f7fc03d042e03ad7b557c220defc4148.
The script is read from a clone of that repository (never copied into this one), patched in
memory, and run in this process with its own command line, so that timing this process from
outside times their code. Two patches, both outside the numerics:

- ``'cuda'`` -> ``'cpu'``: the script hard-codes the device (every buffer ``.to('cuda')``);
- the closing ``plot_pickle(...)`` call is dropped: it draws with ``text.usetex`` (a LaTeX
  install) after the simulation, and the figure is not what is measured.

Their ``density_tensor`` (P_delta(beta, checkpoint), 200 checkpoints) is saved as ``--out`` for
``benchmarks/bench_dynamics.py compare``. The script writes its log and pickle into a
temporary directory.

usage: git clone https://github.com/borjanG/2023-transformers-rotf /tmp/rotf
       python benchmarks/authors_rotf.py /tmp/rotf --out theirs.npy -- --dmodel 32 --ntokens 32 \\
           --batch 512 --betamin 0.1 --betamax 9 --betas 8 --maxtime 30 --use_softmax
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "538ba839f7fc03d042e03ad7b557c220defc4148"
PLOT = "plot_pickle(fname_prefix + '.pkl');"


def patched_source(repo: Path, commit: str) -> str:
    """phase-diagrams.py at ``commit`` with the device and the closing plot patched (see above)."""
    source = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:phase-diagrams.py"], check=True,
                            capture_output=True, text=True).stdout
    if source.count(PLOT) != 1 or "'cuda'" not in source:
        raise SystemExit(f"phase-diagrams.py at {commit} is not the file this harness patches")
    return source.replace("'cuda'", "'cpu'").replace(PLOT, "pass")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a clone (or git directory) of 2023-transformers-rotf")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--out", type=Path, required=True, help="P_delta(beta, checkpoint) as .npy")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, script_args = parser.parse_args(argv[:cut]), argv[cut + 1:]  # after --: phase-diagrams.py's own
    source = patched_source(args.repo, args.commit)
    out = args.out.resolve()
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        sys.argv = ["phase-diagrams.py", *script_args]
        stdout = sys.stdout
        try:
            exec(compile(source, "phase-diagrams.py", "exec"), {"__name__": "__main__"})
        finally:
            sys.stdout = stdout
        (pickled,) = Path(work).glob("*.pkl")
        with pickled.open("rb") as f:
            result = pickle.load(f)
    import numpy as np

    np.save(out, result["density_tensor"].numpy())


if __name__ == "__main__":
    main()
