#!/usr/bin/env bash
# benchmarks/gpu_check.py on a GPU node where attnsweep is not installed (run from the repo root):
# the wheels carried in .whl/ (what the node lacks of attnsweep's dependencies) go into /tmp/site,
# which with workflow/ is put on PYTHONPATH; then the check runs with python3.
#   usage: benchmarks/gpu_check.sh --out gpu-check --authors .authors/phase-diagrams.py
# Making .whl/ (on a machine with pip and network; for the node's Python, here 3.12 on x86-64):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl zarr==3.1.6 numcodecs==0.16.6 donfig==0.8.1.post1 google-crc32c==1.9.0 dask==2026.8.0 \
#     partd==1.4.2 locket==1.0.0 jsonschema==4.26.0 referencing==0.37.0 jsonschema-specifications==2025.9.1 \
#     rpds-py==2026.9.1
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/workflow${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
exec python3 benchmarks/gpu_check.py "$@"
