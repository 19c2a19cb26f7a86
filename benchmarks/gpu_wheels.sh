#!/usr/bin/env bash
# The wheels a device-tool GPU node lacks (its image has Python 3.12, torch with CUDA, numpy,
# xarray, matplotlib; no network), made here on a machine with pip and network, for the node:
#   benchmarks/gpu_wheels.sh            # .whl/: attnsweep's other dependencies (gpu_check.sh)
#   benchmarks/gpu_wheels.sh snakemake  # and .whlsmk/: Snakemake and what it needs (gpu_refine.sh)
# Both folders are ignored by git; the device tool's `carry` takes them to the node. The pins are
# the versions the GPU runs of benchmarks/RESULTS.md used (.whl/ 12 MiB, .whlsmk/ 26 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
download() {  # FOLDER REQUIREMENT...: binary wheels for CPython 3.12 on x86-64 Linux
  local dir=$1
  shift
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$dir" "$@"
}
download .whl zarr==3.1.6 numcodecs==0.16.6 donfig==0.8.1.post1 google-crc32c==1.9.0 dask==2026.8.0 \
  partd==1.4.2 locket==1.0.0 jsonschema==4.26.0 referencing==0.37.0 jsonschema-specifications==2025.9.1 \
  rpds-py==2026.9.1
if [ "${1:-}" = snakemake ]; then
  download .whlsmk snakemake==9.27.1 snakemake-interface-common==1.23.0 \
    snakemake-interface-executor-plugins==9.4.0 snakemake-interface-logger-plugins==2.1.0 \
    snakemake-interface-report-plugins==1.3.0 snakemake-interface-scheduler-plugins==2.0.2 \
    snakemake-interface-storage-plugins==4.4.1 annotated-types==0.8.0 argparse-dataclass==2.0.0 \
    conda-inject==1.3.2 configargparse==1.9.0 docutils==0.22.4 dpath==2.2.0 fastjsonschema==2.22.3 \
    gitdb==4.0.12 gitpython==3.2.1 greenlet==3.5.6 humanfriendly==10.0 immutables==0.21 \
    jupyter-core==5.9.1 nbformat==5.11.1 platformdirs==4.14.8 pulp==3.3.2 pydantic==2.14.4 \
    pydantic-core==2.50.5 smart-open==7.7.1 smmap==5.0.3 sqlalchemy==2.0.58 sqlmodel==0.0.37 \
    tenacity==9.2.1 throttler==1.2.3 traitlets==5.16.1 typing-inspection==0.4.5 yte==1.9.4
  "$python" -m pip wheel -q --no-deps -w .whlsmk connection-pool==0.0.3   # published as source only
fi
du -sh .whl .whlsmk 2>/dev/null
