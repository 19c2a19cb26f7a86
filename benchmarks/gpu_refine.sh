#!/usr/bin/env bash
# One resumable piece of `attnsweep refine CONFIG` on a GPU node where neither attnsweep nor
# Snakemake is installed (the device tool's machines), run in the project (the repo root there):
#   benchmarks/gpu_refine.sh CONFIG SECONDS OUTDIR [REFINE ARGS...]     # ARGS default: --cores 2
# 1. installs the carried wheels into /tmp/site: .whl/ (attnsweep's dependencies the node lacks,
#    made as gpu_check.sh says) and .whlsmk/ (Snakemake and what it needs beyond the node's image);
# 2. runs the refinement for at most SECONDS, then stops it with SIGINT (Snakemake ends its jobs:
#    finished run stores stay, an interrupted job leaves no store, `attnsweep status` lists it
#    as failed and the next piece reruns it);
# 3. packs the config's results and logs folders into OUTDIR/piece.tgz and the log into
#    OUTDIR/refine.log. Unpack piece.tgz at the repo root here; the next piece carries those two
#    folders back (device tool: carry [".whl", ".whlsmk", RESULTS, LOGS]) and goes on.
# --cores 2 runs two simulate jobs side by side on the one GPU (one computes while the other
# starts or writes; an n = 65536 job holds about 10 GiB). PYTHON names the interpreter (python3).
# Making .whlsmk/ (on a machine with pip and network, for the node's Python 3.12 on x86-64):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whlsmk snakemake==9.27.1 snakemake-interface-common==1.23.0 \
#     snakemake-interface-executor-plugins==9.4.0 snakemake-interface-logger-plugins==2.1.0 \
#     snakemake-interface-report-plugins==1.3.0 snakemake-interface-scheduler-plugins==2.0.2 \
#     snakemake-interface-storage-plugins==4.4.1 annotated-types==0.8.0 argparse-dataclass==2.0.0 \
#     conda-inject==1.3.2 configargparse==1.9.0 docutils==0.22.4 dpath==2.2.0 fastjsonschema==2.22.3 \
#     gitdb==4.0.12 gitpython==3.2.1 greenlet==3.5.6 humanfriendly==10.0 immutables==0.21 \
#     jupyter-core==5.9.1 nbformat==5.11.1 platformdirs==4.14.8 pulp==3.3.2 pydantic==2.14.4 \
#     pydantic-core==2.50.5 smart-open==7.7.1 smmap==5.0.3 sqlalchemy==2.0.58 sqlmodel==0.0.37 \
#     tenacity==9.2.1 throttler==1.2.3 traitlets==5.16.1 typing-inspection==0.4.5 yte==1.9.4
#   python3 -m pip wheel --no-deps -w .whlsmk connection-pool==0.0.3     # published as source only
# (the packages Snakemake 9.27.1 needs that the device image, as KINDS.md lists it, lacks; 26 MiB.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
config=$1 seconds=$2 out=$3
shift 3
(($#)) || set -- --cores 2
python=${PYTHON:-python3}
export PYTHONPATH=$root/workflow${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if ! "$python" -c "import zarr, dask, jsonschema, snakemake" 2>/dev/null; then   # what .whl* carry
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$root"/.whl/*.whl "$root"/.whlsmk/*.whl
  export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
read -r results logs < <("$python" -c 'import sys; from attnsweep.config import load_yaml, validate_schema
c = validate_schema(load_yaml(sys.argv[1])); print(c["results"], c["logs"])' "$config")
mkdir -p "$out"
status=0
{
  date -u
  timeout -s INT -k 30 "$seconds" "$python" -m attnsweep.cli refine "$config" "$@" || status=$?
  date -u
  echo "refine exit status $status (124: stopped at $seconds s, to be resumed)"
} >"$out/refine.log" 2>&1
grep -E "attnsweep.refine|steps \(|exit status|UTC" "$out/refine.log" | tail -40 || true
tar czf "$out/piece.tgz" "$results" "$logs"
((status == 124)) && status=0    # stopped as planned
exit "$status"
