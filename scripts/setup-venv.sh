#!/usr/bin/env bash
# Create (or reuse) the virtual environment .venv and install attnsweep into it, editable.
# torch: an installed torch >= 2.4 is kept (a GPU user's CUDA build stays); otherwise the
# CPU wheel torch==2.13.0 where no NVIDIA GPU is present (an unpinned torch pulls a
# multi-GB CUDA build), and the default build where one is.
#   usage: scripts/setup-venv.sh [EXTRA]     EXTRA: test | slurm   (pip extras)
# In short: python3 -m venv .venv; .venv/bin/pip install torch==2.13.0 (no GPU, no torch yet);
#           .venv/bin/pip install --editable ".[EXTRA]"
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ATTNSWEEP_VENV:-.venv}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)

if ! "$venv/bin/python" -c 'import torch, sys; sys.exit(tuple(map(int, torch.__version__.split(".")[:2])) < (2, 4))' 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "${pip[@]}" install 'torch>=2.4'
  else
    "${pip[@]}" install 'torch==2.13.0'
  fi
fi

spec="."
[ $# -gt 0 ] && spec=".[$1]"
"${pip[@]}" install --editable "$spec"
echo "attnsweep installed in $venv ($("$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "cuda" if torch.cuda.is_available() else "cpu")'))"
