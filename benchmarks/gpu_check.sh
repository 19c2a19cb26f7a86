#!/usr/bin/env bash
# benchmarks/gpu_check.py on a GPU node where attnsweep is not installed (run from the repo root):
# the wheels carried in .whl/ (what the node lacks of attnsweep's dependencies) go into /tmp/site,
# which with src/ is put on PYTHONPATH; then the check runs with python3.
#   usage: benchmarks/gpu_check.sh --out gpu-check --authors .authors/phase-diagrams.py
# Making .whl/ (on a machine with pip and network): benchmarks/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
exec python3 benchmarks/gpu_check.py "$@"
