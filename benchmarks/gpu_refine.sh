#!/usr/bin/env bash
# One resumable piece of `attnsweep refine CONFIG` on a GPU node where neither attnsweep nor
# Snakemake is installed (the device tool's machines), run in the project (the repo root there):
#   benchmarks/gpu_refine.sh CONFIG SECONDS OUTDIR [REFINE ARGS...]     # ARGS default: --cores 2
# 1. installs the carried wheels into /tmp/site: .whl/ (attnsweep's dependencies the node lacks,
#    made by gpu_wheels.sh) and .whlsmk/ (Snakemake and what it needs beyond the node's image);
# 2. runs the refinement for at most SECONDS, then stops it with SIGINT (Snakemake ends its jobs:
#    finished run stores stay, an interrupted job leaves no store, `attnsweep status` lists it
#    as failed and the next piece reruns it);
# 3. packs the config's results and logs folders into OUTDIR/piece.tgz and the log into
#    OUTDIR/refine.log. Unpack piece.tgz at the repo root here; the next piece carries those two
#    folders back (device tool: carry [".whl", ".whlsmk", RESULTS, LOGS]) and goes on.
# --cores 2 runs two simulate jobs side by side on the one GPU (one computes while the other
# starts or writes; an n = 65536 job holds about 10 GiB). PYTHON names the interpreter (python3).
# Making .whl/ and .whlsmk/ (on a machine with pip and network): benchmarks/gpu_wheels.sh snakemake
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
config=$1 seconds=$2 out=$3
shift 3
(($#)) || set -- --cores 2
python=${PYTHON:-python3}
export PYTHONPATH=$root/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if ! "$python" -c "import zarr, dask, jsonschema, snakemake" 2>/dev/null; then   # what .whl* carry
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$root"/.whl/*.whl "$root"/.whlsmk/*.whl
  export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
read -r results logs < <("$python" -c 'import sys; from attnsweep.plan.config import load_yaml, validate_schema
c = validate_schema(load_yaml(sys.argv[1])); print(c["results"], c["logs"])' "$config")
mkdir -p "$out"
status=0
{
  date -u
  timeout -s INT -k 30 "$seconds" "$python" -m attnsweep.cli refine "$config" "$@" || status=$?
  date -u
  echo "refine exit status $status (124: stopped at $seconds s, to be resumed)"
} >"$out/refine.log" 2>&1
grep -E "attnsweep.refine.rules|steps \(|exit status|UTC" "$out/refine.log" | tail -40 || true
tar czf "$out/piece.tgz" "$results" "$logs"
((status == 124)) && status=0    # stopped as planned
exit "$status"
